// heapscope: the standalone frontend. `heapscope <command> CORE [options]` opens the core as an Image,
// makes a Session and runs the command from the engine's command table; `heapscope attach PID <command>
// [options]` does the same on a running process, stopped for the time of the analysis.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>

#include "commands/command_runner.h"
#include "coredump/elf_core_image.h"
#include "coredump/live_process_image.h"
#include "coredump/ptrace_attach.h"

namespace {

using namespace heapscope;

struct TargetOptions {
  std::string core;
  std::string executable;
  std::vector<std::string> debug_dirs;
  bool no_debug_files = false;
};

enum class Target { core, live_process };

void add_target_options(CLI::App& sub, TargetOptions& t, Target target) {
  if (target == Target::core)
    sub.add_option("CORE", t.core, "Core file of the process (capture one with scripts/capture-core or gdb's gcore)")
        ->required();
  sub.add_option("--exe", t.executable, "The program's executable, when it is not at the path the core or process records");
  sub.add_option("--debug-dir", t.debug_dirs, "Where separate debug files live (default /usr/lib/debug); repeatable");
  sub.add_flag("--no-debug-files", t.no_debug_files, "Use no separate debug files (as on a machine without them)");
}

int fail(const std::string& message) {
  std::cerr << "heapscope: " << message << "\n";
  return 1;
}

CommandResult analyse(std::shared_ptr<const Image> image, Command& command, const TargetOptions& t,
                      const OutputOptions& output) {
  SessionOptions options;
  if (!t.debug_dirs.empty()) options.symbols.debug_dirs = t.debug_dirs;
  options.symbols.use_debug_files = !t.no_debug_files;
  Session session(std::move(image), options);
  return run_command(session, command, output);
}

int report(const CommandEntry& entry, const CommandResult& result) {
  if (result.exit_code != 0) return fail(std::string(entry.name) + ": " + result.error);
  std::fwrite(result.output.data(), 1, result.output.size(), stdout);
  return 0;
}

int run(const CommandEntry& entry, Command& command, const TargetOptions& t, const OutputOptions& output) {
  CoreOpenOptions open_options;
  open_options.executable = t.executable;
  std::string error;
  std::shared_ptr<ElfCoreImage> image = ElfCoreImage::open(t.core, open_options, &error);
  if (!image) return fail(error);
  if (image->truncated())
    return fail(t.core + " is truncated: " + std::to_string(image->missing_bytes()) +
                " bytes the file promises are missing (disk full or a core size limit when it was written?)");
  return report(entry, analyse(image, command, t, output));
}

// The process is stopped only while the image is read and analysed; the report is printed after it
// runs on again.
int run_attached(int pid, const CommandEntry& entry, Command& command, const TargetOptions& t, const OutputOptions& output) {
  std::string error;
  std::optional<CommandResult> result;
  bool stopped = false;
  try {
    stopped = run_with_process_stopped(
        pid,
        [&](const std::vector<ThreadState>& threads) {
          LiveProcessOptions open_options;
          open_options.executable = t.executable;
          std::shared_ptr<LiveProcessImage> image = LiveProcessImage::open(pid, threads, open_options, &error);
          if (image) result = analyse(image, command, t, output);
        },
        &error);
  } catch (const std::exception& e) {  // rethrown after the process was let go
    return fail(std::string(entry.name) + ": " + e.what());
  }
  if (!stopped || !result) return fail(error);
  return report(entry, *result);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "heapscope: find memory leaks and explain heap retention in C/C++ processes, from a core file or a running "
      "process"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "heapscope 0.1.0");

  struct Invocation {
    const CommandEntry* entry;
    std::unique_ptr<Command> command;
    TargetOptions target;
    OutputOptions output;
    CLI::App* app;
  };
  std::vector<std::unique_ptr<Invocation>> invocations, attached_invocations;
  auto add_commands = [](CLI::App& parent, Target target, std::vector<std::unique_ptr<Invocation>>& out) {
    for (const CommandEntry& entry : command_table()) {
      auto inv = std::make_unique<Invocation>();
      inv->entry = &entry;
      inv->command = entry.make();
      inv->app = parent.add_subcommand(entry.name, entry.description);
      add_target_options(*inv->app, inv->target, target);
      inv->command->add_options(*inv->app);
      add_output_options(*inv->app, inv->output);
      out.push_back(std::move(inv));
    }
  };
  add_commands(app, Target::core, invocations);

  int pid = 0;
  CLI::App* attach = app.add_subcommand(
      "attach", "Run a command on a running process: stop it, analyse it in place, and let it run on unchanged");
  attach->add_option("PID", pid, "Process id of the running program")->required();
  attach->require_subcommand(1);
  add_commands(*attach, Target::live_process, attached_invocations);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  for (auto& inv : invocations)
    if (inv->app->parsed()) return run(*inv->entry, *inv->command, inv->target, inv->output);
  for (auto& inv : attached_invocations)
    if (inv->app->parsed()) return run_attached(pid, *inv->entry, *inv->command, inv->target, inv->output);
  return fail("no command given (try --help)");
}
