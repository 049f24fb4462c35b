// heapscope: the standalone frontend. `heapscope <command> CORE [options]` opens the core as an Image,
// makes a Session and runs the command from the engine's command table; `heapscope attach PID <command>
// [options]` does the same on a running process, stopped for the time of the analysis. A command that
// takes earlier cores (`diff OLD NEW`, `evolution CORE…`) has them before the core it analyses.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>

#include <fcntl.h>
#include <malloc.h>
#include <unistd.h>

#include "commands/command_runner.h"
#include "commands/option_checks.h"
#include "base/cache_directory.h"
#include "base/progress.h"
#include "sources/compressed_core.h"
#include "sources/elf_core_image.h"
#include "sources/live_process_image.h"
#include "sources/ptrace_attach.h"
#include "frontends/common/cache_settings.h"
#include "frontends/common/systemd_coredumps.h"
#include "frontends/common/target_options.h"
#include "frontends/cli/record_command.h"

namespace {

using namespace heapscope;

// The shared target options and, for commands on a core, the core: a file, or one systemd-coredump keeps.
struct CoreTarget : TargetOptions {
  std::string core;
  std::string coredump;           // --coredump MATCH
  CoredumpSource coredump_source;  // --coredump-list, --coredump-store
  bool no_cache = false;           // --no-cache
};

void add_coredump_source_options(CLI::App& sub, CoredumpSource& source) {
  sub.add_option("--coredump-list", source.list_file,
                 "coredumpctl's JSON (coredumpctl --json=short list) from a file, '-' for standard input, in place of "
                 "running coredumpctl: for a store copied from another machine")
      ->type_name("FILE");
  sub.add_option("--coredump-store", source.store, "Where systemd-coredump's cores are (default /var/lib/systemd/coredump)")
      ->type_name("DIR");
}

// CORE, or --coredump MATCH: the core a command on one core reads.
void add_core_options(CLI::App& sub, CoreTarget& t, const char* what) {
  sub.add_option("CORE", t.core, what);
  sub.add_option("--coredump", t.coredump,
                 "In place of CORE: the newest core systemd-coredump keeps of a pid or a program (by name or path); "
                 "`heapscope coredumps` lists them")
      ->type_name("MATCH");
  add_coredump_source_options(sub, t.coredump_source);
}

// The core file a command on one core reads: CORE, or the core --coredump picks from the journal.
bool resolve_core(CoreTarget& t, std::string* error) {
  if (!t.coredump.empty() && !t.core.empty()) {
    *error = "give a CORE or --coredump MATCH, not both";
    return false;
  }
  if (t.coredump.empty()) {
    if (t.core.empty()) *error = "a CORE file is required (or --coredump MATCH for a core systemd-coredump keeps)";
    return !t.core.empty();
  }
  const std::optional<std::vector<JournalCore>> cores = journal_cores(t.coredump_source, error);
  if (!cores) return false;
  t.core = pick_coredump(*cores, t.coredump, error);
  return !t.core.empty();
}

enum class Target { core, live_process };

// `core_positional`: whether the core is its own CORE positional (not for a live process, nor for a
// command that lists it among its cores). `on_core`: the command analyses a core (the index cache's
// --no-cache), not a live process.
void add_target_options(CLI::App& sub, CoreTarget& t, bool core_positional, bool on_core) {
  if (core_positional)
    add_core_options(sub, t,
                     "Core file of the process, compressed or not (capture one with scripts/capture-core or gdb's "
                     "gcore; or give --coredump)");
  heapscope::add_target_options(sub, static_cast<TargetOptions&>(t));
  if (on_core)
    sub.add_flag("--no-cache", t.no_cache,
                 "Neither use nor write the index cache (the heap, pointer graph and leak verdicts an earlier "
                 "command saved for this core; docs/usage.md, \"Index cache\"); HEAPSCOPE_NO_CACHE=1 does the same");
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

// Progress as one line rewritten in place on stderr, when stderr is a terminal; and the interrupt flag.
void adapt(Progress& progress) {
  progress.set_interrupt_check([] { return g_interrupted.load(); });
  if (!::isatty(STDERR_FILENO)) return;
  progress.set_display([](const ProgressStatus& status) {
    const std::string line = "\r\033[K" + (status.done ? std::string() : status.text());
    std::fwrite(line.data(), 1, line.size(), stderr);
    std::fflush(stderr);
  });
}

void adapt(Session& session) {
  session.set_interrupt_check([] { return g_interrupted.load(); });
  adapt(session.progress());
}

// Runs `open` (which may decompress a core: minutes for a large one) with a progress line and Ctrl-C, as
// the analysis has them; false with *error = "interrupted" after Ctrl-C.
template <class Open>
bool with_progress(Open&& open, std::string* error) {
  Progress progress;
  adapt(progress);
  progress.begin();
  ProgressScope current(&progress);
  try {
    open();
  } catch (const Interrupted&) {
    *error = "interrupted";
  }
  progress.end();
  return error->empty();
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
// A compressed core is decompressed first (sources/compressed_core.h).
std::shared_ptr<ElfCoreImage> open_core(const std::string& core, const TargetOptions& t, std::string* error) {
  std::shared_ptr<ElfCoreImage> image;
  with_progress([&] { image = ElfCoreImage::open(core, core_open_options(t), error); }, error);
  return image;
}

// Writes the index in this process. Failing to write it is worth a note, not a failed command.
int write_index(Session& session, int exit_code) {
  try {
    session.save_index_cache();
  } catch (const std::exception& e) {
    if (g_interrupted) return interrupted();  // the output stands; no index was written
    std::cerr << "heapscope: note: index cache not written: " << e.what() << "\n";
  }
  return exit_code;
}

// Once the output is out, the next command on this core in a new process can start from what this one
// computed. A child process writes the index, so that the command ends with its output: at 20 M blocks
// the index is 760 MB and takes 1-2 s to write, most of it the kernel taking it into the page cache
// (docs/performance.md, "Index cache"). The child leaves the output stream at once, so a pipe after
// heapscope ends with the command; it keeps stderr only with HEAPSCOPE_TIMING set, to print its phase
// (a caller reading that stderr to its end then waits for the index, as tests and benchmarks want).
// Until its rename the index does not exist, so a command started meanwhile computes as without one.
int save_index(Session& session, int exit_code) {
  if (exit_code != 0 || !session.index_cache_outdated()) return exit_code;
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t child = ::fork();
  if (child < 0) return write_index(session, exit_code);
  if (child > 0) return exit_code;
  const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  ::dup2(null, STDOUT_FILENO);
  if (!std::getenv("HEAPSCOPE_TIMING")) ::dup2(null, STDERR_FILENO);
  write_index(session, exit_code);
  std::fflush(stderr);
  ::_exit(0);  // the parent owns everything else: nothing to destroy or flush twice
}

int run(const CommandEntry& entry, Command& command, const CoreTarget& t, const OutputOptions& output) {
  std::string error;
  std::shared_ptr<ElfCoreImage> image = open_core(t.core, t, &error);
  if (!image) return g_interrupted ? interrupted() : fail(error);
  SessionOptions options = session_options(t);
  options.state_name = std::filesystem::path(t.core).filename().string();
  options.index_cache = index_cache_for(t.core, !t.no_cache);
  Session session(std::move(image), options);
  adapt(session);
  return save_index(session, report(entry, run_command(session, command, output)));
}

// `heapscope unpack CORE`: the path of a core a debugger can load — a compressed core's uncompressed copy
// in the core copy cache (made now, or reused), an uncompressed core's own path — on stdout alone.
int unpack(const std::string& core) {
  const Compression compression = compression_of(core);
  std::string path = core, error;
  std::optional<UnpackedCore> copy;
  if (compression != Compression::none) {
    if (CoreCopyCache::process().dir().empty())
      return fail("unpack: the copy is kept in the core copy cache, which HEAPSCOPE_NO_CORE_CACHE=1 turns off (or no "
                  "cache directory can be made out: set HEAPSCOPE_CACHE_DIR); decompress it yourself, or let "
                  "heapscope's other commands read it as it is");
    if (!with_progress([&] { copy = CoreCopyCache::process().unpack(core, compression, &error); }, &error))
      return g_interrupted ? interrupted() : fail("unpack: " + error);
    path = copy->path();
  }
  // Opened as a command would open it, to say here what a debugger would not: that it is no core, or cut.
  CoreOpenOptions quiet;
  quiet.use_debuginfod = false;
  const std::unique_ptr<ElfCoreImage> image = ElfCoreImage::open(path, quiet, &error);
  if (!image) return fail("unpack: " + (copy ? core + " holds no core heapscope reads: " + error : error));
  // A cut file is worth saying before a debugger is handed it (the analysis commands say the rest).
  if (copy && copy->stream_cut())
    std::cerr << "heapscope: warning: " << core << "'s " << compression_name(compression)
              << " stream ends early (the file was cut short): the copy holds what came before\n";
  else if (image->truncated())
    std::cerr << "heapscope: warning: " << image->damage() << "\n";
  std::cout << path << "\n";
  return 0;
}

// `heapscope coredumps`: the journal's cores, newest first.
int list_coredumps(const CoredumpSource& source, bool json) {
  std::string error;
  const std::optional<std::vector<JournalCore>> cores = journal_cores(source, &error);
  if (!cores) return fail("coredumps: " + error);
  std::cout << (json ? coredumps_json(*cores) : coredumps_text(*cores, source));
  return 0;
}

// The command's earlier cores when it takes them as positionals (`diff OLD NEW`); null otherwise.
CoreSeries* positional_series(Command& command) {
  CoreSeries* series = command.core_series();
  return series && series->positional ? series : nullptr;
}

// `diff OLD NEW`, `evolution c3 c1 c2`: the cores listed, in order (by time where the command orders
// them), the last being the one analysed and the others its earlier cores.
bool take_last_as_current(CoreSeries& series, std::string& core, std::string* error) {
  if (series.order_by_time && !order_by_write_time(series.cores, error)) return false;
  core = series.cores.back();
  series.cores.pop_back();
  series.order_by_time = false;
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
  // A fixed threshold for mapping large allocations, not glibc's sliding one. Once the first large block is
  // freed (a decompressed debug section, after unwinding), glibc would serve every allocation up to its size
  // from the heap and keep it when freed; a command's arrays come and go phase by phase, and kept they add
  // up at the peak (about 5 % of `roots` at 1M blocks). Mapped, each is returned when it is freed. Not in
  // the debugger plugins: their process is the debugger's.
  ::mallopt(M_MMAP_THRESHOLD, 128 * 1024);
  if (std::string cache_error; !use_file_caches(&cache_error)) std::cerr << "heapscope: warning: " << cache_error << "\n";
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
  };
  std::vector<std::unique_ptr<Invocation>> invocations, attached_invocations;
  auto add_commands = [](CLI::App& parent, Target target, std::vector<std::unique_ptr<Invocation>>& out) {
    for (const CommandEntry& entry : command_table()) {
      auto inv = std::make_unique<Invocation>();
      inv->entry = &entry;
      inv->command = entry.make();
      inv->app = parent.add_subcommand(entry.name, entry.description);
      // A command whose positionals are earlier cores lists the analysed core with them: `diff OLD NEW`.
      CoreSeries* series = positional_series(*inv->command);
      if (series && target == Target::core) series->listed_with_current = true;
      add_target_options(*inv->app, inv->target, target == Target::core && !series, target == Target::core);
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

  RecordOptions record_options;
  CLI::App* record = add_record_command(app, record_options);
  CoreTarget unpack_target;
  CLI::App* unpack_app = app.add_subcommand(
      "unpack",
      "Decompress a compressed core (zstd as systemd-coredump keeps it, lz4, xz, gzip) once into the core copy cache "
      "and print the copy's path, for a debugger: lldb -c \"$(heapscope unpack core.zst)\". An uncompressed core's "
      "own path is printed");
  add_core_options(*unpack_app, unpack_target, "The core file, compressed or not");

  CoredumpSource coredump_source;
  bool coredumps_json_output = false;
  CLI::App* coredumps_app = app.add_subcommand(
      "coredumps",
      "List the cores systemd-coredump keeps (through coredumpctl), newest first: when, pid, signal, whether the "
      "file is still there, the program, the file; any command takes one with --coredump PID or --coredump PROGRAM");
  add_coredump_source_options(*coredumps_app, coredump_source);
  coredumps_app->add_flag("--json", coredumps_json_output, "The list as JSON");

  if (const std::optional<int> handled = help_or_unknown_command(app, *attach, argc, argv)) return *handled;
  stop_on_interrupt();
  // `record`'s program and its arguments are not heapscope's to parse: CLI11 sees what comes before them.
  int parsed_argc = argc;
  if (argc > 1 && std::string_view(argv[1]) == "record") {
    const int program = record_program_start(argc, argv);
    record_options.program.assign(argv + program, argv + argc);
    parsed_argc = program > 2 && std::string_view(argv[program - 1]) == "--" ? program - 1 : program;
  }
  try {
    app.parse(parsed_argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    return fail(std::string(e.what()) + " (--help lists the options)");
  }
  if (record->parsed()) return run_record(record_options);
  for (auto& inv : invocations) {
    if (!inv->app->parsed()) continue;
    CoreSeries* series = positional_series(*inv->command);
    std::string error;
    if (series && !take_last_as_current(*series, inv->target.core, &error))
      return fail(std::string(inv->entry->name) + ": " + error);
    if (!series && !resolve_core(inv->target, &error)) return fail(std::string(inv->entry->name) + ": " + error);
    return run(*inv->entry, *inv->command, inv->target, inv->output);
  }
  if (unpack_app->parsed()) {
    std::string error;
    if (!resolve_core(unpack_target, &error)) return fail("unpack: " + error);
    return unpack(unpack_target.core);
  }
  if (coredumps_app->parsed()) return list_coredumps(coredump_source, coredumps_json_output);
  for (auto& inv : attached_invocations)
    if (inv->app->parsed()) return run_attached(pid, *inv->entry, *inv->command, inv->target, inv->output);
  return fail("no command given (try --help)");
}
