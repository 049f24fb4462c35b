// heapscope: the standalone frontend. `heapscope <command> CORE [options]` opens the core as an Image,
// makes a Session and runs the command from the engine's command table; `heapscope attach PID <command>
// [options]` does the same on a running process, stopped for the time of the analysis. `heapscope diff
// OLD NEW`, `heapscope evolution CORE…` and `heapscope report CORE --earlier OLD…` save the earlier cores' snapshots, one Session at a time, into
// one store and run the table's `snapshot diff` / `evolution` / `report` on the last core's Session.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>

#include <unistd.h>

#include "commands/command_runner.h"
#include "commands/option_checks.h"
#include "sources/elf_core_image.h"
#include "sources/live_process_image.h"
#include "sources/ptrace_attach.h"
#include "frontends/common/target_options.h"
#include "queries/heap_snapshot.h"

namespace {

using namespace heapscope;

// The shared target options and, for commands on a core, the core.
struct CoreTarget : TargetOptions {
  std::string core;
};

enum class Target { core, live_process };

void add_target_options(CLI::App& sub, CoreTarget& t, Target target) {
  if (target == Target::core)
    sub.add_option("CORE", t.core, "Core file of the process (capture one with scripts/capture-core or gdb's gcore)")
        ->required();
  heapscope::add_target_options(sub, static_cast<TargetOptions&>(t));
}

int fail(const std::string& message) {
  std::cerr << "heapscope: " << message << "\n";
  return 1;
}

// Ctrl-C on a core: SIGINT sets a flag that the session's interrupt check reads, so the analysis stops
// within its next 50 ms and heapscope says so and exits with 130, as a shell expects of an interrupted
// program. (`attach` handles SIGINT itself: it lets the process go at once, sources/ptrace_attach.h.)
std::atomic<bool> g_interrupted{false};
static_assert(std::atomic<bool>::is_always_lock_free);
constexpr int kInterruptedExit = 128 + SIGINT;

extern "C" void note_interrupt(int) { g_interrupted.store(true); }

void stop_on_interrupt() {
  struct sigaction action {};
  action.sa_handler = note_interrupt;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGINT, &action, nullptr);
}

// The session's progress as one line rewritten in place on stderr, when stderr is a terminal; and the
// interrupt flag.
void adapt(Session& session) {
  session.set_interrupt_check([] { return g_interrupted.load(); });
  if (!::isatty(STDERR_FILENO)) return;
  session.progress().set_display([](const ProgressStatus& status) {
    const std::string line = "\r\033[K" + (status.done ? std::string() : status.text());
    std::fwrite(line.data(), 1, line.size(), stderr);
    std::fflush(stderr);
  });
}

CommandResult analyse(std::shared_ptr<const Image> image, Command& command, const TargetOptions& t,
                      const OutputOptions& output) {
  Session session(std::move(image), session_options(t));
  adapt(session);
  return run_command(session, command, output);
}

int interrupted() {
  std::cerr << "heapscope: interrupted\n";
  return kInterruptedExit;
}

int report(const CommandEntry& entry, const CommandResult& result) {
  if (result.exit_code != 0 && g_interrupted) return interrupted();
  if (result.exit_code != 0) return fail(std::string(entry.name) + ": " + result.error);
  std::fwrite(result.output.data(), 1, result.output.size(), stdout);
  return 0;
}

// Null with *error set when the core cannot be used. A truncated core opens with what it holds: its
// warning says what is missing, and analyses that lose roots or heap to it say their result is partial.
std::shared_ptr<ElfCoreImage> open_core(const std::string& core, const TargetOptions& t, std::string* error) {
  return ElfCoreImage::open(core, core_open_options(t), error);
}

int run(const CommandEntry& entry, Command& command, const CoreTarget& t, const OutputOptions& output) {
  std::string error;
  std::shared_ptr<ElfCoreImage> image = open_core(t.core, t, &error);
  if (!image) return fail(error);
  return report(entry, analyse(image, command, t, output));
}

// ---- diff and evolution: a series of cores of one program ----

struct SeriesOptions {
  std::vector<std::string> cores;
  CoreTarget target;
  OutputOptions output;
  bool keep_order = false;
};

// What reports call each core: its file name, or the path as given when two cores share a file name.
std::vector<std::string> snapshot_names(const std::vector<std::string>& cores) {
  std::vector<std::string> names;
  for (const std::string& core : cores) names.push_back(std::filesystem::path(core).filename().string());
  for (std::size_t i = 0; i < names.size(); ++i)
    if (std::count(names.begin(), names.end(), names[i]) > 1) names[i] = cores[i];
  return names;
}

// Opens every core but the last, one Session at a time, and saves its snapshot into `store`; then runs
// `command` on the last core's Session. Errors name the core that caused them.
int run_series(const char* name, const SeriesOptions& o, Command& command) {
  const std::vector<std::string> names = snapshot_names(o.cores);
  auto store = std::make_shared<SnapshotStore>();
  auto session_for = [&](std::size_t i, std::string* error) -> std::unique_ptr<Session> {
    std::shared_ptr<ElfCoreImage> image = open_core(o.cores[i], o.target, error);
    if (!image) return nullptr;
    SessionOptions options = session_options(o.target);
    options.snapshots = store;
    options.state_name = names[i];
    auto session = std::make_unique<Session>(std::move(image), options);
    adapt(*session);
    return session;
  };
  std::string error;
  for (std::size_t i = 0; i + 1 < o.cores.size(); ++i) {
    std::unique_ptr<Session> session = session_for(i, &error);
    if (!session) return fail(error);
    try {
      store->save(take_snapshot(*session, names[i]));
    } catch (const AnalysisError& e) {
      if (g_interrupted) return interrupted();
      return fail(std::string(name) + ": " + o.cores[i] + ": " + e.what());
    }
  }
  std::unique_ptr<Session> last = session_for(o.cores.size() - 1, &error);
  if (!last) return fail(error);
  const CommandResult result = run_command(*last, command, o.output);
  if (result.exit_code != 0 && g_interrupted) return interrupted();
  if (result.exit_code != 0) return fail(std::string(name) + ": " + o.cores.back() + ": " + result.error);
  std::fwrite(result.output.data(), 1, result.output.size(), stdout);
  return 0;
}

// Cores in the order they were written (their files' modification times); a core that cannot be read is
// a clear error naming it.
bool order_by_capture_time(std::vector<std::string>& cores, std::string* error) {
  std::vector<std::pair<std::int64_t, std::string>> timed;
  for (const std::string& core : cores) {
    const std::optional<std::int64_t> mtime = file_mtime_ns(core);
    if (!mtime) {
      *error = "cannot read " + core + ": no such file or no access";
      return false;
    }
    timed.emplace_back(*mtime, core);
  }
  std::stable_sort(timed.begin(), timed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (std::size_t i = 0; i < cores.size(); ++i) cores[i] = timed[i].second;
  return true;
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

std::vector<std::string> subcommand_names(CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) names.push_back(sub->get_name());
  return names;
}

CLI::App* subcommand_named(CLI::App& app, const std::string& name) {
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
    if (sub->get_name() == name) return sub;
  return nullptr;
}

// `heapscope help [COMMAND]` prints what `--help` would; a mistyped command (`heapscope leak CORE`) is an
// error that names the command meant, where CLI11 alone would only say that a subcommand is required.
// Returns the exit code when it handled the command line.
std::optional<int> help_or_unknown_command(CLI::App& app, CLI::App& attach, int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  auto unknown = [](CLI::App& parent, const std::string& word, const std::string& prefix) {
    return fail(unknown_command_message(word, subcommand_names(parent), "'" + prefix + " --help' lists the commands"));
  };
  if (!args.empty() && args[0] == "help") {
    if (args.size() == 1) {
      std::cout << app.help();
      return 0;
    }
    CLI::App* sub = subcommand_named(app, args[1]);
    if (!sub) return unknown(app, args[1], "heapscope");
    CLI::App* attached = args[1] == "attach" && args.size() > 2 ? subcommand_named(attach, args[2]) : nullptr;
    std::cout << (attached ? attached->help() : sub->help());
    return 0;
  }
  if (!args.empty() && !args[0].starts_with("-") && !subcommand_named(app, args[0]))
    return unknown(app, args[0], "heapscope");
  if (args.size() > 2 && args[0] == "attach" && !args[2].starts_with("-") && !subcommand_named(attach, args[2]))
    return unknown(attach, args[2], "heapscope attach");
  return std::nullopt;
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
    CoreTarget target;
    OutputOptions output;
    CLI::App* app;
    std::vector<std::string> earlier_cores;  // report: earlier cores of the program, for its evolution part
  };
  std::vector<std::unique_ptr<Invocation>> invocations, attached_invocations;
  auto add_commands = [](CLI::App& parent, Target target, std::vector<std::unique_ptr<Invocation>>& out) {
    for (const CommandEntry& entry : command_table()) {
      // On cores, `evolution` takes a series of cores (below); one core is a series of one.
      if (target == Target::core && std::string(entry.name) == "evolution") continue;
      auto inv = std::make_unique<Invocation>();
      inv->entry = &entry;
      inv->command = entry.make();
      inv->app = parent.add_subcommand(entry.name, entry.description);
      add_target_options(*inv->app, inv->target, target);
      inv->command->add_options(*inv->app);
      add_output_options(*inv->app, inv->output);
      if (target == Target::core && std::string(entry.name) == "report")
        inv->app->add_option("--earlier", inv->earlier_cores,
                             "Earlier cores of the same program (repeatable): the report gains the evolution of "
                             "bytes per type over them and CORE, with a sparkline per type");
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

  // heapscope diff OLD NEW [options]: the options after the cores are `snapshot diff`'s (-n, --sample).
  SeriesOptions diff;
  std::string diff_old, diff_new;
  CLI::App* diff_app = app.add_subcommand(
      "diff", "Two cores of one program: per type and per root, count and bytes in OLD and NEW, most growth first; "
              "for cores of one process also the blocks new since OLD, with their retainers");
  diff_app->add_option("OLD", diff_old, "The earlier core")->required();
  diff_app->add_option("NEW", diff_new, "The later core")->required();
  add_target_options(*diff_app, diff.target, Target::live_process);
  add_output_options(*diff_app, diff.output);
  diff_app->allow_extras();
  diff_app->footer("Options of `snapshot diff` follow the cores: -n,--count ROWS (0: all), --sample N.");

  // heapscope evolution CORE… [options]: the table's `evolution` command and its options.
  SeriesOptions evolution;
  std::unique_ptr<Command> evolution_command = find_command("evolution")->make();
  CLI::App* evolution_app = app.add_subcommand(
      "evolution", "Cores taken over time: bytes per type at each, steady growers first; a chart with -o FILE.svg");
  evolution_app->add_option("CORE", evolution.cores, "Cores of one program, ordered by their files' times")->required();
  evolution_app->add_flag("--keep-order", evolution.keep_order, "Keep the cores in the order given");
  add_target_options(*evolution_app, evolution.target, Target::live_process);
  evolution_command->add_options(*evolution_app);
  add_output_options(*evolution_app, evolution.output);

  if (const std::optional<int> handled = help_or_unknown_command(app, *attach, argc, argv)) return *handled;
  stop_on_interrupt();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    return fail(std::string(e.what()) + " (--help lists the options)");
  }
  if (diff_app->parsed()) {
    // The table's snapshot command, given `diff OLD` and the options that followed the cores.
    std::unique_ptr<Command> snapshot_command = find_command("snapshot")->make();
    CLI::App snapshot_app("snapshot diff", "heapscope diff");
    snapshot_command->add_options(snapshot_app);
    diff.cores = {diff_old, diff_new};
    std::vector<std::string> words = diff_app->remaining();
    words.insert(words.begin(), {"diff", snapshot_names(diff.cores).front()});
    std::reverse(words.begin(), words.end());  // CLI11 takes the words last-first
    try {
      snapshot_app.parse(words);
    } catch (const CLI::ParseError& e) {
      return fail(std::string("diff: ") + e.what());
    }
    return run_series("diff", diff, *snapshot_command);
  }
  if (evolution_app->parsed()) {
    std::string error;
    if (!evolution.keep_order && !order_by_capture_time(evolution.cores, &error)) return fail("evolution: " + error);
    return run_series("evolution", evolution, *evolution_command);
  }
  for (auto& inv : invocations) {
    if (!inv->app->parsed()) continue;
    if (inv->earlier_cores.empty()) return run(*inv->entry, *inv->command, inv->target, inv->output);
    SeriesOptions series{inv->earlier_cores, inv->target, inv->output};
    std::string error;
    if (!order_by_capture_time(series.cores, &error)) return fail(std::string(inv->entry->name) + ": " + error);
    series.cores.push_back(inv->target.core);
    return run_series(inv->entry->name, series, *inv->command);
  }
  for (auto& inv : attached_invocations)
    if (inv->app->parsed()) return run_attached(pid, *inv->entry, *inv->command, inv->target, inv->output);
  return fail("no command given (try --help)");
}
