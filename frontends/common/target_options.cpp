#include "frontends/common/target_options.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

namespace heapscope {

namespace {

// "/srv/box/" and "/srv/box" name the same sysroot; module paths are appended to it. A relative one is
// made absolute, so that `summary` names each module's file by a path that holds wherever it is read.
std::string without_trailing_slashes(std::string dir) {
  if (!dir.empty() && dir.front() != '/') {
    std::error_code ec;
    const std::filesystem::path absolute = std::filesystem::absolute(dir, ec);
    if (!ec) dir = absolute.lexically_normal().string();
  }
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir == "/" ? "" : dir;
}

}  // namespace

void add_target_options(CLI::App& app, TargetOptions& t) {
  app.add_option("--exe", t.executable,
                 "The program's executable, when it is not at the path the core or process records");
  app.add_option("--debug-dir", t.debug_dirs, "Where separate debug files live (default /usr/lib/debug); repeatable");
  app.add_flag("--no-debug-files", t.no_debug_files,
               "Use no separate debug files (as on a machine without them), local or from debuginfod");
  app.add_flag("--no-debuginfod", t.no_debuginfod,
               "Fetch nothing from the debuginfod servers of DEBUGINFOD_URLS (debug files, or the module files of "
               "a core from another machine)");
  app.add_option("--sysroot", t.sysroot,
                 "A copy of the core's machine: module files are read at their recorded paths under DIR, and "
                 "debug files are also looked for under DIR/usr/lib/debug")
      ->type_name("DIR");
  app.add_option("--leak-check-heuristics", t.leak_idioms,
                 "Which interior-pointer idioms make a block reachable, as valgrind's option of that name: all "
                 "(the default), none, memcheck (valgrind's default: its four), or a list of stdstring,length64,"
                 "newarray,multipleinheritance,length-prefixed,fixed-offset,pool")
      ->type_name("LIST")
      ->check([](const std::string& list) {
        std::string error;
        return parse_idioms(list, &error) ? std::string() : error;
      });
}

CoreOpenOptions core_open_options(const TargetOptions& t) {
  CoreOpenOptions options;
  options.executable = t.executable;
  options.sysroot = without_trailing_slashes(t.sysroot);
  options.use_debuginfod = !t.no_debuginfod;
  return options;
}

SessionOptions session_options(const TargetOptions& t) {
  SessionOptions options;
  if (!t.debug_dirs.empty()) options.symbols.debug_dirs = t.debug_dirs;
  // As gdb does with a sysroot: each debug directory is looked in on this machine, then under the sysroot.
  if (const std::string sysroot = without_trailing_slashes(t.sysroot); !sysroot.empty()) {
    const std::vector<std::string> local = options.symbols.debug_dirs;
    for (const std::string& dir : local)
      if (!dir.empty() && dir.front() == '/') options.symbols.debug_dirs.push_back(sysroot + dir);
  }
  options.symbols.use_debug_files = !t.no_debug_files;
  options.symbols.use_debuginfod = !t.no_debuginfod;
  std::string error;
  options.leak_idioms = parse_idioms(t.leak_idioms, &error).value_or(kAllIdioms);  // checked when parsed
  options.open_core = core_opener(core_open_options(t), options);
  return options;
}

std::function<std::unique_ptr<Session>(const std::string&, std::string*)> core_opener(CoreOpenOptions open,
                                                                                     SessionOptions session) {
  session.open_core = nullptr;  // an earlier core's own commands compare with nothing
  session.on_product = nullptr;
  session.snapshots = nullptr;  // its own store: only the snapshot taken of it leaves it
  return [open = std::move(open), session = std::move(session)](const std::string& core,
                                                              std::string* error) -> std::unique_ptr<Session> {
    std::shared_ptr<ElfCoreImage> image = ElfCoreImage::open(core, open, error);
    if (!image) return nullptr;
    return std::make_unique<Session>(std::move(image), session);
  };
}

bool parse_target_options(const std::vector<std::string>& words, TargetOptions* options, std::string* error) {
  if (words.empty()) return true;
  CLI::App app("target options", "heapscope");
  add_target_options(app, *options);
  std::vector<std::string> args(words.rbegin(), words.rend());  // CLI11 takes the words last-first
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    std::string given;
    for (const std::string& word : words) given += (given.empty() ? "" : " ") + word;
    *error = "bad options '" + given + "': " + e.what();
    return false;
  }
  return true;
}

}  // namespace heapscope
