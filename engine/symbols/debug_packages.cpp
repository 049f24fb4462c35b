#include "symbols/debug_packages.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <vector>

#include "base/program_output.h"

namespace heapscope {

namespace {

void add_once(std::vector<std::string>& list, std::string item) {
  if (!item.empty() && std::find(list.begin(), list.end(), item) == list.end()) list.push_back(std::move(item));
}

// The forms dpkg may know a library by on a merged-/usr system: bookworm's packages still list
// /lib/x86_64-linux-gnu/libc.so.6 while the process saw /usr/lib/..., and the other way round.
std::vector<std::string> spellings(const std::string& path) {
  std::vector<std::string> out{path};
  if (path.rfind("/usr/", 0) == 0) add_once(out, path.substr(4));
  else if (path.rfind("/lib", 0) == 0 || path.rfind("/bin/", 0) == 0 || path.rfind("/sbin/", 0) == 0)
    add_once(out, "/usr" + path);
  std::error_code ec;
  add_once(out, std::filesystem::canonical(path, ec).string());
  return out;
}

// Runs `dpkg -S PATH…` (no shell: paths go as arguments) and returns what it printed.
std::string dpkg_search(const std::vector<std::string>& paths) {
  std::vector<std::string> words{"dpkg", "-S"};
  words.insert(words.end(), paths.begin(), paths.end());
  std::optional<ProgramOutput> printed = program_output(std::move(words));
  return printed ? std::move(printed->out) : std::string();
}

// dpkg's answer, path by path: "libc6:amd64: /lib/x86_64-linux-gnu/libc.so.6" → libc6 owns that path;
// diversions list several ("a, b: path"): the first owns it. Lines that only report a diversion are skipped.
std::map<std::string, std::string> owners_by_path(const std::string& dpkg_output) {
  std::map<std::string, std::string> owners;
  std::istringstream lines(dpkg_output);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("diversion by", 0) == 0 || line.rfind("local diversion", 0) == 0) continue;
    const std::size_t colon_space = line.find(": ");
    if (colon_space == std::string::npos) continue;
    std::string package = line.substr(0, std::min(colon_space, line.find(", ")));
    package = package.substr(0, package.find(':'));
    if (!package.empty()) owners.emplace(line.substr(colon_space + 2), std::move(package));
  }
  return owners;
}

// The package that owns the first of the module's spellings dpkg knows, as `dpkg -S` of its spellings
// alone would name first (dpkg answers its arguments in order).
std::string owner_of(const std::vector<std::string>& spellings, const std::map<std::string, std::string>& owners) {
  for (const std::string& spelling : spellings)
    if (auto it = owners.find(spelling); it != owners.end()) return it->second;
  return {};
}

std::string hint_for_package(const std::string& package) {
  if (package.empty()) return {};
  if (package == "libc6") return "apt install libc6-dbg";
  return "apt install " + package + "-dbgsym";
}

// The hints of the paths not asked about before, into `cache`: one `dpkg -S` for all of them, since each
// run reads dpkg's whole database (a tenth of a second: run once per module, it was most of `summary`).
void look_up(const std::vector<std::string>& module_paths, std::map<std::string, std::string>& cache) {
  const bool dpkg_present = ::access("/var/lib/dpkg/info", F_OK) == 0;
  std::map<std::string, std::vector<std::string>> spellings_of;  // the paths dpkg is asked about
  std::vector<std::string> arguments;
  for (const std::string& path : module_paths) {
    if (cache.contains(path) || spellings_of.contains(path)) continue;
    if (!dpkg_present || path.empty() || path.front() != '/') {
      cache.emplace(path, "");
      continue;
    }
    for (const std::string& spelling : spellings_of[path] = spellings(path)) add_once(arguments, spelling);
  }
  if (spellings_of.empty()) return;
  const std::map<std::string, std::string> owners = owners_by_path(dpkg_search(arguments));
  for (const auto& [path, forms] : spellings_of) cache.emplace(path, hint_for_package(owner_of(forms, owners)));
}

}  // namespace

std::vector<std::string> debug_package_hints(const std::vector<std::string>& module_paths) {
  static std::mutex mutex;
  static auto* cache = new std::map<std::string, std::string>();  // never destroyed
  std::lock_guard lock(mutex);
  look_up(module_paths, *cache);
  std::vector<std::string> hints;
  for (const std::string& path : module_paths) hints.push_back(cache->at(path));
  return hints;
}

}  // namespace heapscope
