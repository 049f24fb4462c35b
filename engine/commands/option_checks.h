// Checks and hints shared by every frontend's command line: whole-number options that refuse a sign
// instead of wrapping "-1" to 2^64−1, and the "did you mean" for a mistyped command.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace heapscope {

// Accepts decimal digits only, at least `minimum`: "--min-size -1" and "-n 1.5" are errors that say what
// is wanted ("must be a whole number of at least 1").
CLI::Validator whole_number(std::uint64_t minimum = 0);

// The name in `names` closest to a mistyped `word` ("leak" → "leaks", "sumary" → "summary"): one that
// `word` begins or that is at most two edits away, or empty when none is that close.
std::string closest_name(const std::string& word, const std::vector<std::string>& names);

// "unknown command 'leak'; did you mean 'leaks'? ('heap help' lists the commands)".
std::string unknown_command_message(const std::string& word, const std::vector<std::string>& names,
                                    const std::string& help_hint);

}  // namespace heapscope
