#include "model/leak_verdicts.h"

#include "base/progress.h"
#include "base/workers.h"

namespace heapscope {

namespace {

// Marks every block reachable from the roots; with `start_pointers_only`, only pointers to a block's
// first byte count (valgrind's "definitely reachable").
std::vector<std::uint8_t> reach(const ReferenceGraph& g, bool start_pointers_only) {
  std::vector<std::uint8_t> seen(g.block_count(), 0);
  std::vector<BlockId> stack;
  auto admit = [&](std::uint32_t e) { return !(start_pointers_only && edge_is_interior(e)); };
  for (std::size_t r = 0; r < g.root_count(); ++r)
    for (std::uint32_t e : g.root_edges(r))
      if (admit(e) && !seen[edge_target(e)]) {
        seen[edge_target(e)] = 1;
        stack.push_back(edge_target(e));
      }
  flood(stack, seen, [&](BlockId b) { return g.out_edges(b); }, admit);
  return seen;
}

}  // namespace

LeakVerdicts compute_verdicts(const ReferenceGraph& g, const HeapModel& heap) {
  const std::size_t n = g.block_count();
  LeakVerdicts out;
  out.verdict.assign(n, Verdict::not_allocated);
  out.possibly.assign(n, 0);
  progress_total(2 * n);  // two reachability passes, each visiting at most every block once
  // The two passes share nothing but the graph: one thread each.
  std::vector<std::uint8_t> reached, firmly;
  run_workers(2, [&](unsigned pass) { (pass == 0 ? reached : firmly) = reach(g, /*start_pointers_only=*/pass == 1); });
  for (std::size_t b = 0; b < n; ++b) out.possibly[b] = reached[b] && !firmly[b];
  firmly = {};
  for (std::size_t b = 0; b < n; ++b)
    if (is_allocated(heap.blocks[b].state))
      out.verdict[b] = reached[b] ? Verdict::reachable : Verdict::direct_leak;

  // A leaked block that another leaked block points to is indirect; what remains direct starts a leak.
  for (BlockId b = 0; b < n; ++b) {
    if (!is_leaked(out.verdict[b])) continue;
    for (std::uint32_t e : g.out_edges(b)) {
      const BlockId t = edge_target(e);
      if (t != b && is_leaked(out.verdict[t])) out.verdict[t] = Verdict::indirect_leak;
    }
  }
  // Leaked blocks no direct leak reaches sit in (or under) cycles with no entry.
  std::vector<std::uint8_t> covered(n, 0);
  std::vector<BlockId> stack;
  for (BlockId b = 0; b < n; ++b)
    if (out.verdict[b] == Verdict::direct_leak) {
      covered[b] = 1;
      stack.push_back(b);
    }
  flood(stack, covered, [&](BlockId b) { return g.out_edges(b); },
        [&](std::uint32_t e) { return is_leaked(out.verdict[edge_target(e)]); });
  for (BlockId b = 0; b < n; ++b)
    if (is_leaked(out.verdict[b]) && !covered[b]) out.verdict[b] = Verdict::cycle_leak;
  return out;
}

}  // namespace heapscope
