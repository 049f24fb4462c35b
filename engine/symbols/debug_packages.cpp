#include "symbols/debug_packages.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <map>
#include <mutex>
#include <sstream>
#include <vector>

extern char** environ;

namespace heapscope {

namespace {

// The forms dpkg may know a library by on a merged-/usr system: bookworm's packages still list
// /lib/x86_64-linux-gnu/libc.so.6 while the process saw /usr/lib/..., and the other way round.
std::vector<std::string> spellings(const std::string& path) {
  std::vector<std::string> out{path};
  auto add = [&](std::string p) {
    if (!p.empty() && std::find(out.begin(), out.end(), p) == out.end()) out.push_back(std::move(p));
  };
  if (path.rfind("/usr/", 0) == 0) add(path.substr(4));
  else if (path.rfind("/lib", 0) == 0 || path.rfind("/bin/", 0) == 0 || path.rfind("/sbin/", 0) == 0) add("/usr" + path);
  std::error_code ec;
  add(std::filesystem::canonical(path, ec).string());
  return out;
}

// Runs `dpkg -S PATH…` (no shell: paths go as arguments) and returns what it printed.
std::string dpkg_search(const std::vector<std::string>& paths) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return {};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  std::vector<std::string> words{"dpkg", "-S"};
  words.insert(words.end(), paths.begin(), paths.end());
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = ::posix_spawnp(&pid, "dpkg", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipe_fds[1]);
  std::string out;
  if (spawned == 0) {
    char buffer[4096];
    for (ssize_t n; (n = ::read(pipe_fds[0], buffer, sizeof buffer)) > 0;) out.append(buffer, static_cast<std::size_t>(n));
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  ::close(pipe_fds[0]);
  return out;
}

// "libc6:amd64: /lib/x86_64-linux-gnu/libc.so.6" → "libc6"; diversions list several ("a, b: path"): the
// first owns it.
std::string first_package(const std::string& dpkg_output) {
  std::istringstream lines(dpkg_output);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("diversion by", 0) == 0) continue;
    const std::size_t colon_space = line.find(": ");
    if (colon_space == std::string::npos) continue;
    std::string package = line.substr(0, std::min(colon_space, line.find(", ")));
    package = package.substr(0, package.find(':'));
    if (!package.empty()) return package;
  }
  return {};
}

std::string hint_for(const std::string& module_path) {
  if (module_path.empty() || module_path.front() != '/' || ::access("/var/lib/dpkg/info", F_OK) != 0) return {};
  const std::string package = first_package(dpkg_search(spellings(module_path)));
  if (package.empty()) return {};
  if (package == "libc6") return "apt install libc6-dbg";
  return "apt install " + package + "-dbgsym";
}

}  // namespace

std::string debug_package_hint(const std::string& module_path) {
  static std::mutex mutex;
  static auto* cache = new std::map<std::string, std::string>();  // never destroyed
  std::lock_guard lock(mutex);
  auto it = cache->find(module_path);
  if (it == cache->end()) it = cache->emplace(module_path, hint_for(module_path)).first;
  return it->second;
}

}  // namespace heapscope
