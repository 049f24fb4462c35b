// Running another program for what it prints (dpkg -S, coredumpctl): no shell, so arguments go as they are.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace heapscope {

struct ProgramOutput {
  std::string out;     // all it wrote to stdout (its stderr goes to /dev/null)
  int exit_code = -1;  // its exit status; -1 when a signal ended it
};

// Runs `words` (words[0] looked up in PATH) and waits for it; nullopt when it cannot be started (not installed).
std::optional<ProgramOutput> program_output(std::vector<std::string> words);

}  // namespace heapscope
