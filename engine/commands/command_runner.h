// Running one command of the table against a session and rendering its report: what every frontend
// does after it has parsed the command line with the command's own options.
#pragma once

#include <string>

#include "commands/command.h"
#include "formatters/render.h"

namespace heapscope {

struct CommandResult {
  int exit_code = 0;
  std::string output;  // the rendered report
  std::string error;   // one line, set when exit_code != 0
};

// Options every command has (output format). Bound to `format`.
void add_output_options(CLI::App& app, OutputFormat& format);

// Runs and renders; analysis failures become an error result, never an exception.
CommandResult run_command(Session& session, Command& command, OutputFormat format);

}  // namespace heapscope
