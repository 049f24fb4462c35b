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

// The earlier cores of the program a command compares the current state with (`diff OLD`, `evolution
// CORE…`, `report --earlier CORE`). Before the command runs, the runner opens each with the frontend's
// SessionOptions::open_core, one at a time, and saves its snapshot into the session's store under
// `names[i]`: the core's file name, or its path as given when two share a file name.
struct CoreSeries {
  std::vector<std::string> cores;
  bool order_by_time = false;  // take them in the order their files were written, not as given
  bool positional = false;     // given as the command's positionals (add_core_positionals), not an option
  // A frontend whose command line names the current core too (the CLI: `heapscope diff OLD NEW`) sets this
  // before add_options: the cores positional then takes one core more, the last in order being the one
  // analysed (with order_by_time, the newest). add_core_positionals does both.
  bool listed_with_current = false;
  std::vector<std::string> names;  // set by the runner

  static CoreSeries given_as_positionals(bool order_by_time) { return make(order_by_time, true); }
  static CoreSeries given_as_option(bool order_by_time) { return make(order_by_time, false); }

 private:
  static CoreSeries make(bool order_by_time, bool positional) {
    CoreSeries series;
    series.order_by_time = order_by_time;
    series.positional = positional;
    return series;
  }
};

// The positional of a command whose earlier cores are given as positionals: `min` to `max` of them (max 0:
// any number), named and described by `earlier`; where the frontend lists the current core with them,
// one more, named and described by `listed`.
struct CorePositional {
  std::string name, description;
};
void add_core_positionals(CLI::App& app, CoreSeries& series, const CorePositional& earlier,
                          const CorePositional& listed, int min, int max);

class Command {
 public:
  virtual ~Command() = default;
  // Declares the command's own options and positionals on `app` (bound to members of the command).
  virtual void add_options(CLI::App& app) = 0;
  // Runs against the session. Throws AnalysisError when nothing useful can be produced.
  virtual Report run(Session& session) = 0;
  // The earlier cores this command was given, when it is one that takes them.
  virtual CoreSeries* core_series() { return nullptr; }
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
std::unique_ptr<Command> make_diff_command();

}  // namespace heapscope
