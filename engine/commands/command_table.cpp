#include "commands/command.h"

namespace heapscope {

const std::vector<CommandEntry>& command_table() {
  static const std::vector<CommandEntry> table = {
      {"summary", "Threads, modules and heap overview: arenas, blocks and bytes per state", make_summary_command},
      {"blocks", "List heap blocks by state or leak verdict, with size and arena", make_blocks_command},
      {"leaks", "Leaked blocks grouped by type and size: direct, indirect, cycles", make_leaks_command},
      {"retainers", "Shortest paths from roots to the block containing ADDR", make_retainers_command},
      {"refs", "Every block and root that points into the block containing ADDR", make_refs_command},
      {"describe", "The block containing ADDR: state, type, verdict, bytes, the pointers it holds and its DWARF fields",
       make_describe_command},
      {"histogram", "Allocated blocks by type: count and bytes, live and leaked", make_histogram_command},
      {"top", "Largest retained sizes by block, type or root, and leak suspects (dominator tree)", make_top_command},
      {"roots", "Retained bytes per root kind, then per root (global variable, thread, TLS block)", make_roots_command},
      {"threads", "Per thread: bytes its stack, registers and TLS retain; exited threads and who holds their pthread_t",
       make_threads_command},
      {"coroutines", "C++20 coroutine frames per coroutine function; --stacks: async stacks, identical ones folded",
       make_coroutines_command},
      {"chains", "Chains of same-type blocks linked one to one: wrapped callbacks, runaway lists", make_chains_command},
      {"finalizers", "Exit handlers, thread_local destructors and pthread keys: what each keeps alive until exit",
       make_finalizers_command},
      {"report", "Summary, leaks, top and roots in one document: -o report.html writes one self-contained page",
       make_report_command},
      {"verify", "Check malloc's own structures for damage: chunk headers, bins, fastbins, tcache, top, heap_info",
       make_verify_command},
      {"fragmentation", "Page occupancy, what trimming would return, and the live blocks holding sparse pages and top",
       make_fragmentation_command},
      {"snapshot", "Named heap snapshots: save NAME, diff NAME (what grew since, new blocks and their retainers), list, drop",
       make_snapshot_command},
      {"diff", "An earlier core OLD of the program against now: per type and per root, count and bytes then and now, "
               "most growth first; for cores of one process also the blocks new since OLD, with their retainers",
       make_diff_command},
      {"evolution", "Bytes per type over every saved snapshot, earlier cores given, and now; steady growers first; a "
                    "chart with -o FILE.svg",
       make_evolution_command},
  };
  return table;
}

void add_core_positionals(CLI::App& app, CoreSeries& series, const CorePositional& earlier,
                          const CorePositional& listed, int min, int max) {
  const int extra = series.listed_with_current ? 1 : 0;
  const CorePositional& shown = series.listed_with_current ? listed : earlier;
  CLI::Option* option = app.add_option(shown.name, series.cores, shown.description);
  option->expected(min + extra, max == 0 ? CLI::detail::expected_max_vector_size : max + extra);
  if (min + extra > 0) option->required();
}

const CommandEntry* find_command(const std::string& name) {
  for (const CommandEntry& e : command_table())
    if (name == e.name) return &e;
  return nullptr;
}

}  // namespace heapscope
