// The one command grammar. Each command declares its options on a CLI11 app and produces a report from
// a Session; the standalone CLI and the debugger frontends all build their `heap <command>` from this
// table, so a command is written once. Adding a command = one file here + one line in command_table.cpp.
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <string>
#include <vector>

#include "reports/report.h"
#include "session/session.h"

namespace heapscope {

class Command {
 public:
  virtual ~Command() = default;
  // Declares the command's own options and positionals on `app` (bound to members of the command).
  virtual void add_options(CLI::App& app) = 0;
  // Runs against the session. Throws AnalysisError when nothing useful can be produced.
  virtual Report run(Session& session) = 0;
};

struct CommandEntry {
  const char* name;
  const char* description;  // one line, shown by help
  std::unique_ptr<Command> (*make)();
};

const std::vector<CommandEntry>& command_table();
const CommandEntry* find_command(const std::string& name);

// Factories, one per command file.
std::unique_ptr<Command> make_summary_command();
std::unique_ptr<Command> make_blocks_command();
std::unique_ptr<Command> make_leaks_command();
std::unique_ptr<Command> make_retainers_command();
std::unique_ptr<Command> make_refs_command();
std::unique_ptr<Command> make_describe_command();
std::unique_ptr<Command> make_histogram_command();
std::unique_ptr<Command> make_top_command();
std::unique_ptr<Command> make_roots_command();
std::unique_ptr<Command> make_threads_command();
std::unique_ptr<Command> make_coroutines_command();
std::unique_ptr<Command> make_chains_command();
std::unique_ptr<Command> make_finalizers_command();
std::unique_ptr<Command> make_report_command();
std::unique_ptr<Command> make_verify_command();
std::unique_ptr<Command> make_fragmentation_command();
std::unique_ptr<Command> make_snapshot_command();
std::unique_ptr<Command> make_evolution_command();

}  // namespace heapscope
