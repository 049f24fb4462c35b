// Running one command of the table against a session and rendering its report: what every frontend
// does after it has parsed the command line with the command's own options.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "commands/command.h"
#include "formatters/render.h"

namespace heapscope {

struct CommandResult {
  int exit_code = 0;
  std::string output;  // the rendered report
  std::string error;   // one line, set when exit_code != 0
};

// What every command has besides its own options: the format, and a file to write instead of the console
// (the way to get an HTML page out of a debugger session).
struct OutputOptions {
  std::optional<OutputFormat> format;  // unset: from the output file's extension (.json, .html, .dot, .svg), else text
  std::string path;                    // empty: the rendered report is the command's output
  // Progress is not shown for JSON output (a program reads it), unless the frontend's caller asked for
  // it: the Python module, whose callers get JSON and pass a progress callback.
  bool progress_with_json = false;
  OutputFormat effective_format() const;
};
void add_output_options(CLI::App& app, OutputOptions& options);

// Runs and renders; analysis failures become an error result, never an exception. With a path the
// report goes to that file and the output is one line saying so. A command given earlier cores
// (Command::core_series) has their snapshots saved first; an error about one of them names it.
CommandResult run_command(Session& session, Command& command, const OutputOptions& options);

// The cores in the order their files were written; nothing, with *error naming it, for a core that
// cannot be read.
bool order_by_write_time(std::vector<std::string>& cores, std::string* error);

// What snapshot reports call each core: its file name, or the path as given when two share a file name.
std::vector<std::string> core_snapshot_names(const std::vector<std::string>& cores);

}  // namespace heapscope
