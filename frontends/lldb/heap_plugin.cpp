// The LLDB plugin: `plugin load libheapscope_lldb.so` adds a `heap` command whose subcommands are the
// engine's command table (engine/commands/command.h). Each subcommand only hands its words to
// execute_command_line; what a command does and which options it takes is written once, in the engine.
//
// A session (the heap walk, the graph and the analyses over them) is kept while the process stays at
// the same stop, so a second command is fast; it is dropped as soon as the process has run.
//
// Ctrl-C: while the analysis runs on a worker thread, the command's thread (base/serving_thread.h) polls
// the command interpreter's WasInterrupted() every 50 ms and sets a flag the session's interrupt check
// reads; long loops see it within their next 50 ms (Session::set_interrupt_check), and the products
// already computed are kept for the next command on the same stop.
//
// Progress: LLDB 16 has no SBProgress, so a command that runs longer than a second shows its phase and
// percentage as one line rewritten in place on LLDB's error stream, when that is a terminal (never for
// JSON output: the command runner keeps the session's Progress quiet then).
#include <lldb/API/LLDB.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include <unistd.h>

#include "commands/command_line.h"
#include "frontends/common/cache_settings.h"
#include "frontends/common/target_options.h"
#include "frontends/lldb/address_expression.h"
#include "frontends/lldb/lldb_image.h"
#include "base/serving_thread.h"

namespace {

using namespace heapscope;
using namespace heapscope::lldb_plugin;

constexpr const char* kRequiredVersion = "16.";
constexpr const char* kNoProcess = "heap: no process; load a core (target create --core) or run/attach first";

CommandResult failure(std::string message) {
  CommandResult result;
  result.exit_code = 1;
  result.error = std::move(message);
  return result;
}

bool asks_for_help(const std::vector<std::string>& words) {
  return std::any_of(words.begin() + 1, words.end(), [](const std::string& w) { return w == "--help" || w == "-h"; });
}

// LLDB 16 gives a list setting as one string, "  [0]: /a  [1]: /b c"; a scalar as itself ("true").
std::vector<std::string> split_list_setting(const std::string& text) {
  static const std::regex item(R"(\s*\[\d+\]: )");
  std::vector<std::string> values;
  std::sregex_iterator it(text.begin(), text.end(), item), end;
  if (it == end) {
    if (!text.empty()) values.push_back(text);
    return values;
  }
  for (; it != end; ++it) {
    const auto start = static_cast<std::size_t>(it->position() + it->length());
    auto next = std::next(it);
    const std::size_t stop = next == end ? text.size() : static_cast<std::size_t>(next->position());
    std::string value = text.substr(start, stop - start);
    while (!value.empty() && value.back() == ' ') value.pop_back();
    if (!value.empty()) values.push_back(std::move(value));
  }
  return values;
}

std::vector<std::string> setting_values(lldb::SBDebugger& debugger, const char* name) {
  std::vector<std::string> values;
  lldb::SBStringList list = debugger.GetInternalVariableValue(name, debugger.GetInstanceName());
  for (std::uint32_t i = 0; i < list.GetSize(); ++i)
    if (const char* text = list.GetStringAtIndex(i); text && *text)
      for (std::string& value : split_list_setting(text)) values.push_back(std::move(value));
  return values;
}

// Debug files where LLDB looks for them: `settings set target.debug-file-search-paths` adds directories
// before /usr/lib/debug, and `settings set symbols.enable-external-lookup false` (LLDB's switch for
// looking symbols up outside the machine's files) keeps heapscope from asking debuginfod too.
SymbolSearchOptions symbol_search_options(lldb::SBDebugger debugger) {
  SymbolSearchOptions options;
  std::vector<std::string> dirs = setting_values(debugger, "target.debug-file-search-paths");
  if (!dirs.empty()) {
    dirs.insert(dirs.end(), options.debug_dirs.begin(), options.debug_dirs.end());
    options.debug_dirs = std::move(dirs);
  }
  const std::vector<std::string> external = setting_values(debugger, "symbols.enable-external-lookup");
  if (!external.empty() && external.front() == "false") options.use_debuginfod = false;
  return options;
}

// Earlier cores of the program (`heap diff OLD`) are opened with the target's executable, as
// `target create EXE --core OLD` would.
CoreOpenOptions earlier_core_options(lldb::SBTarget target) {
  CoreOpenOptions options;
  char path[4096] = {};
  if (lldb::SBFileSpec exe = target.GetExecutable(); exe.IsValid() && exe.GetPath(path, sizeof path) > 0)
    options.executable = path;
  return options;
}

// The progress line on LLDB's error stream: the analysis posts each status from its threads; the LLDB
// thread writes the latest one (idle) and clears the line at the end.
class ProgressLine {
 public:
  // Null when the error stream is not a terminal: then nothing is shown.
  static std::unique_ptr<ProgressLine> on_terminal(lldb::SBDebugger& debugger) {
    FILE* err = debugger.GetErrorFileHandle();
    if (!err || !::isatty(::fileno(err))) return nullptr;
    return std::make_unique<ProgressLine>(err);
  }
  explicit ProgressLine(FILE* out) : out_(out) {}

  void post(const ProgressStatus& status) {
    std::lock_guard lock(mutex_);
    pending_ = status;
  }
  // On the LLDB thread.
  void write() {
    std::optional<ProgressStatus> status;
    {
      std::lock_guard lock(mutex_);
      status.swap(pending_);
    }
    if (!status) return;
    const std::string line = status->done ? "\r\033[K" : "\r\033[K" + status->text();
    std::fwrite(line.data(), 1, line.size(), out_);
    std::fflush(out_);
  }

 private:
  FILE* out_;
  std::mutex mutex_;
  std::optional<ProgressStatus> pending_;
};

// What the subcommands share: the session of the process's current stop, and the thread that talks
// to LLDB while a command runs.
class HeapCommands {
 public:
  CommandResult run(lldb::SBDebugger debugger, const std::vector<std::string>& words) {
    std::lock_guard lock(mutex_);  // one heap command at a time, whichever thread LLDB runs it on
    lldb_thread_.adopt_current_thread();
    if (asks_for_help(words)) return CommandResult{0, command_help(words[0], "heap"), ""};
    lldb::SBTarget target = debugger.GetSelectedTarget();
    lldb::SBProcess process = target.IsValid() ? target.GetProcess() : lldb::SBProcess();
    if (!process.IsValid()) return failure(kNoProcess);
    switch (process.GetState()) {
      case lldb::eStateStopped:
      case lldb::eStateCrashed:
      case lldb::eStateSuspended:
        break;
      case lldb::eStateRunning:
      case lldb::eStateStepping:
      case lldb::eStateLaunching:
      case lldb::eStateAttaching:
        return failure("heap: the process is running; stop it first (process interrupt)");
      default:
        return failure(kNoProcess);
    }
    Session& session = session_for(process);
    lldb::SBFrame frame = process.GetSelectedThread().GetSelectedFrame();
    session.set_address_evaluator([this, frame, target](const std::string& text) {
      return evaluate_address_expression(lldb_thread_, frame, target, text);
    });
    // Ctrl-C: LLDB's driver marks the running command interrupted; the analysis stops at its next phase.
    lldb::SBCommandInterpreter interpreter = debugger.GetCommandInterpreter();
    std::atomic<bool> interrupted{false};
    session.set_interrupt_check([&interrupted] { return interrupted.load(); });
    std::unique_ptr<ProgressLine> progress = ProgressLine::on_terminal(debugger);
    if (progress)
      session.progress().set_display([line = progress.get()](const ProgressStatus& status) { line->post(status); });
    struct ForgetCallbacks {
      Session& s;
      ~ForgetCallbacks() {
        s.set_interrupt_check({});
        s.progress().set_display({});
      }
    } forget_callbacks{session};
    CommandResult result;
    lldb_thread_.run_serving([&] { result = execute_command_line(session, words); },
                             [&] {
                               interrupted = interrupted || interpreter.WasInterrupted();
                               if (progress) progress->write();
                             });
    if (progress) progress->write();  // the last status: the line cleared
    if (result.exit_code != 0) result.error = "heap " + result.error;
    return result;
  }

 private:
  Session& session_for(lldb::SBProcess& process) {
    const std::uint32_t process_id = process.GetUniqueID();
    // Stops after expressions that ran code count too: `expr free(p)` changes the heap.
    const std::uint32_t stop_id = process.GetStopID(/*include_expression_stops=*/true);
    if (!session_ || process_id != session_process_ || stop_id != session_stop_) {
      session_.reset();  // free the old stop's analyses before building the new image
      auto image = std::make_shared<LldbImage>(process, lldb_thread_);
      SessionOptions options;
      options.symbols = symbol_search_options(process.GetTarget().GetDebugger());
      options.snapshots = snapshots_.store_for("lldb process " + std::to_string(process_id));
      options.open_core = core_opener(earlier_core_options(process.GetTarget()), options);
      session_ = std::make_unique<Session>(image, options);
      session_process_ = process_id;
      session_stop_ = stop_id;
    }
    return *session_;
  }

  std::mutex mutex_;
  ServingThread lldb_thread_;
  // Named snapshots per process (LLDB's process unique id), kept across stops: `heap snapshot save a`,
  // `continue`, `heap snapshot diff a` compares two Sessions' heaps.
  SnapshotRegistry snapshots_;
  std::unique_ptr<Session> session_;
  std::uint32_t session_process_ = 0;
  std::uint32_t session_stop_ = 0;
};

// Never destroyed: LLDB may tear itself down before this library's static destructors would run, and
// the session holds LLDB objects.
HeapCommands& heap_commands() {
  static HeapCommands* commands = new HeapCommands();
  return *commands;
}

class HeapSubcommand : public lldb::SBCommandPluginInterface {
 public:
  explicit HeapSubcommand(std::string name) : name_(std::move(name)) {}

  bool DoExecute(lldb::SBDebugger debugger, char** arguments, lldb::SBCommandReturnObject& result) override {
    CommandResult outcome;
    try {
      std::vector<std::string> words{name_};
      for (char** a = arguments; a && *a; ++a) words.emplace_back(*a);
      outcome = heap_commands().run(debugger, words);
    } catch (const std::bad_alloc&) {
      outcome = failure("heap " + name_ + ": out of memory");
    } catch (const std::exception& e) {
      outcome = failure("heap " + name_ + ": " + e.what());
    } catch (...) {
      outcome = failure("heap " + name_ + ": unexpected failure");
    }
    if (outcome.exit_code != 0) {
      result.SetError(outcome.error.c_str());
      return false;
    }
    result.AppendMessage(outcome.output.c_str());
    result.SetStatus(lldb::eReturnStatusSuccessFinishResult);
    return true;
  }

 private:
  std::string name_;
};

void report(lldb::SBDebugger& debugger, const std::string& message) {
  const std::string line = "heapscope: " + message + "\n";
  lldb::SBFile err = debugger.GetErrorFile();
  std::size_t written = 0;
  if (err.IsValid() && err.Write(reinterpret_cast<const std::uint8_t*>(line.data()), line.size(), &written).Success())
    return;
  std::fputs(line.c_str(), stderr);
}

// Where a help line's wrapped rest should start: an option line's description column ("  -n,--count UINT
// [20]   How many…" continues under "How"), else the line's own indentation.
std::size_t hanging_indent(const std::string& line) {
  constexpr std::size_t kDescriptionColumn = 30;  // CLI11's help column, where option descriptions start
  const std::size_t text = line.find_first_not_of(' ');
  if (text == std::string::npos) return 0;
  const std::size_t gap = line.find("  ", text);
  // An option whose name and type are too long for the column: its rest goes under the descriptions.
  if (gap == std::string::npos && text <= 8 && line[text] == '-') return kDescriptionColumn;
  if (text > 8 || gap == std::string::npos) return text;
  const std::size_t column = line.find_first_not_of(' ', gap);
  return column == std::string::npos ? text : column;
}

// LLDB re-wraps every help line longer than the terminal and starts the rest at that line's own
// indentation, which pulls an option's wrapped description back under the option names. Wrapping the
// text first, each rest indented to its description column, leaves LLDB nothing to re-wrap.
std::string fit_help_to_width(const std::string& help, std::size_t width) {
  std::string out;
  std::size_t start = 0;
  while (start < help.size()) {
    std::size_t end = help.find('\n', start);
    if (end == std::string::npos) end = help.size();
    std::string line = help.substr(start, end - start);
    start = end + 1;
    const std::size_t indent = std::min(hanging_indent(line), width / 2);
    while (line.size() > width) {
      // At the last space that fits; a word longer than the line (an option's list of choices) is cut
      // after its last comma that fits, or at the width.
      std::size_t cut = line.rfind(' ', width);
      std::size_t keep = cut;
      if (cut == std::string::npos || cut <= indent) {
        const std::size_t comma = line.rfind(',', width - 1);
        cut = keep = comma != std::string::npos && comma > indent ? comma + 1 : width;
      }
      out += line.substr(0, keep) + "\n";
      const std::size_t rest = line.find_first_not_of(' ', cut);
      line = rest == std::string::npos ? std::string() : std::string(indent, ' ') + line.substr(rest);
    }
    out += line + "\n";
  }
  return out;
}

// The width LLDB wraps help text to (its terminal width, 80 in batch mode), less a column for safety.
std::size_t help_width(lldb::SBDebugger& debugger) {
  const std::uint32_t terminal = debugger.GetTerminalWidth();
  return std::clamp<std::size_t>(terminal ? terminal : 80, 40, 200) - 1;
}

bool register_heap_command(lldb::SBDebugger& debugger) {
  lldb::SBCommandInterpreter interpreter = debugger.GetCommandInterpreter();
  lldb::SBCommand heap =
      interpreter.AddMultiwordCommand("heap", "Find memory leaks and explain heap retention (heapscope).");
  if (!heap.IsValid()) {
    report(debugger, "cannot add the 'heap' command");
    return false;
  }
  // LLDB lists the subcommands itself, after this text; the engine's overview would list them twice.
  const std::size_t width = help_width(debugger);
  heap.SetHelpLong(fit_help_to_width(
                       "heap <command> [options] runs a heapscope analysis on the process or core LLDB has "
                       "stopped. Address arguments are LLDB expressions. 'help heap <command>' (or 'heap "
                       "<command> --help') shows a command's options.",
                       width)
                       .c_str());
  for (const CommandEntry& entry : command_table()) {
    const std::string syntax = std::string("heap ") + entry.name + " [options]";
    // Owned by LLDB's command from now on, for as long as LLDB lives.
    auto* implementation = new HeapSubcommand(entry.name);
    // An empty repeat command: pressing Enter again must not rerun a long analysis.
    lldb::SBCommand sub = heap.AddCommand(entry.name, implementation, entry.description, syntax.c_str(), "");
    if (!sub.IsValid()) {
      report(debugger, std::string("cannot add 'heap ") + entry.name + "'");
      return false;
    }
    sub.SetHelpLong(fit_help_to_width(command_help(entry.name, "heap"), width).c_str());
  }
  return true;
}

}  // namespace

namespace lldb {

// Called by `plugin load`. The plugin is built against LLDB 16's SB API and refuses any other LLDB.
__attribute__((visibility("default"))) bool PluginInitialize(SBDebugger debugger) {
  try {
    const char* version = SBDebugger::GetVersionString();
    if (!version || !std::strstr(version, kRequiredVersion)) {
      report(debugger, std::string("this plugin is built for LLDB 16 and this is ") + (version ? version : "an unknown LLDB") +
                           "; build heapscope against this LLDB, or load it into lldb-16");
      return false;
    }
    use_file_caches();
    return register_heap_command(debugger);
  } catch (const std::exception& e) {
    report(debugger, std::string("cannot load: ") + e.what());
  } catch (...) {
    report(debugger, "cannot load: unexpected failure");
  }
  return false;
}

}  // namespace lldb
