// heapscope: the standalone frontend. `heapscope <command> CORE [options]` opens the core as an Image,
// makes a Session and runs the command from the engine's command table.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>
#include <memory>

#include "commands/command_runner.h"
#include "coredump/elf_core_image.h"

namespace {

using namespace heapscope;

struct TargetOptions {
  std::string core;
  std::string executable;
  std::vector<std::string> debug_dirs;
  bool no_debug_files = false;
};

void add_target_options(CLI::App& sub, TargetOptions& t) {
  sub.add_option("CORE", t.core, "Core file of the process (capture one with scripts/capture-core or gdb's gcore)")
      ->required();
  sub.add_option("--exe", t.executable, "The program's executable, when it is not where the core says");
  sub.add_option("--debug-dir", t.debug_dirs, "Where separate debug files live (default /usr/lib/debug); repeatable");
  sub.add_flag("--no-debug-files", t.no_debug_files, "Use no separate debug files (as on a machine without them)");
}

int fail(const std::string& message) {
  std::cerr << "heapscope: " << message << "\n";
  return 1;
}

int run(const CommandEntry& entry, Command& command, const TargetOptions& t, OutputFormat format) {
  CoreOpenOptions open_options;
  open_options.executable = t.executable;
  std::string error;
  std::shared_ptr<ElfCoreImage> image = ElfCoreImage::open(t.core, open_options, &error);
  if (!image) return fail(error);
  if (image->truncated())
    return fail(t.core + " is truncated: " + std::to_string(image->missing_bytes()) +
                " bytes the file promises are missing (disk full or a core size limit when it was written?)");
  SessionOptions options;
  if (!t.debug_dirs.empty()) options.symbols.debug_dirs = t.debug_dirs;
  options.symbols.use_debug_files = !t.no_debug_files;
  Session session(image, options);
  CommandResult result = run_command(session, command, format);
  if (result.exit_code != 0) return fail(std::string(entry.name) + ": " + result.error);
  std::fwrite(result.output.data(), 1, result.output.size(), stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"heapscope: find memory leaks and explain heap retention in C/C++ processes from a core file"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "heapscope 0.1.0");

  struct Invocation {
    const CommandEntry* entry;
    std::unique_ptr<Command> command;
    TargetOptions target;
    OutputFormat format = OutputFormat::text;
    CLI::App* app;
  };
  std::vector<std::unique_ptr<Invocation>> invocations;
  for (const CommandEntry& entry : command_table()) {
    auto inv = std::make_unique<Invocation>();
    inv->entry = &entry;
    inv->command = entry.make();
    inv->app = app.add_subcommand(entry.name, entry.description);
    add_target_options(*inv->app, inv->target);
    inv->command->add_options(*inv->app);
    add_output_options(*inv->app, inv->format);
    invocations.push_back(std::move(inv));
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  for (auto& inv : invocations)
    if (inv->app->parsed()) return run(*inv->entry, *inv->command, inv->target, inv->format);
  return fail("no command given (try --help)");
}
