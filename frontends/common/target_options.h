// The target options of the frontends outside a debugger — the CLI and the C API (whose GDB frontend
// fills them from gdb's own settings): where the executable, the module files and the debug files of the
// analysed process are, and whether debuginfod may be asked for what is missing. Declared once here so
// that every frontend takes the same words.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sources/elf_core_image.h"
#include "session/session.h"

namespace heapscope {

struct TargetOptions {
  std::string executable;               // --exe
  std::vector<std::string> debug_dirs;  // --debug-dir (repeatable); empty: /usr/lib/debug
  bool no_debug_files = false;          // --no-debug-files
  bool no_debuginfod = false;           // --no-debuginfod
  std::string sysroot;                  // --sysroot
  std::string leak_idioms = "all";      // --leak-check-heuristics
};

// Adds --exe, --debug-dir, --no-debug-files, --no-debuginfod, --sysroot and --leak-check-heuristics to `app`.
void add_target_options(CLI::App& app, TargetOptions& options);

// The target options given as words by a frontend that takes them in one piece (the C API's option string,
// the Python module's keyword arguments, GDB's settings turned into words). False with *error naming them.
bool parse_target_options(const std::vector<std::string>& words, TargetOptions* options, std::string* error);

// How modules are opened for a core, and how their symbols are searched, under these options (with an
// open_core that opens earlier cores the same way).
CoreOpenOptions core_open_options(const TargetOptions& options);
SessionOptions session_options(const TargetOptions& options);

// SessionOptions::open_core for a frontend: each earlier core opened with `open`, its Session made with
// `session` (a debugger passes its own settings).
std::function<std::unique_ptr<Session>(const std::string&, std::string*)> core_opener(CoreOpenOptions open,
                                                                                     SessionOptions session);

}  // namespace heapscope
