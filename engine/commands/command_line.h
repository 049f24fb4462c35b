// Running a command given as words, the way a debugger frontend receives it: `heap leaks --json` arrives
// as {"leaks", "--json"}. The grammar is the command table's, so `heap <command>` in LLDB and GDB
// accepts exactly what `heapscope <command> CORE` accepts after the core.
#pragma once

#include <string>
#include <vector>

#include "commands/command_runner.h"

namespace heapscope {

// words[0] is the command name; the rest are its options. "help" or an empty list list the commands;
// `--help` after a command prints its help. Parse errors and analysis failures come back as errors.
// progress_with_json: show progress for JSON output too (OutputOptions::progress_with_json).
CommandResult execute_command_line(Session& session, const std::vector<std::string>& words,
                                   bool progress_with_json = false);

// Help text of one command (its options, as CLI11 prints them), or of all commands for an empty name.
std::string command_help(const std::string& name, const std::string& prefix = "heap");

// Splits a command string the way a shell would for simple cases: whitespace separates words, single
// and double quotes group them, a backslash escapes the next character.
std::vector<std::string> split_command_words(const std::string& text);

}  // namespace heapscope
