#include "commands/command.h"

namespace heapscope {

const std::vector<CommandEntry>& command_table() {
  static const std::vector<CommandEntry> table = {
      {"summary", "Threads, modules and heap overview: arenas, blocks and bytes per state", make_summary_command},
      {"blocks", "List heap blocks with their state, size and arena", make_blocks_command},
  };
  return table;
}

const CommandEntry* find_command(const std::string& name) {
  for (const CommandEntry& e : command_table())
    if (name == e.name) return &e;
  return nullptr;
}

}  // namespace heapscope
