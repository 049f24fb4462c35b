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

std::vector<BlockId> leaked_blocks(const std::vector<Verdict>& verdict) {
  std::vector<BlockId> out;
  for (std::size_t b = 0; b < verdict.size(); ++b)
    if (is_leaked(verdict[b])) out.push_back(static_cast<BlockId>(b));
  return out;
}

LeakVerdicts compute_verdicts(const ReferenceGraph& g, const HeapModel& heap) {
  const std::size_t n = g.block_count();
  LeakVerdicts out;
  out.verdict.assign(n, Verdict::not_allocated);
  out.possibly.assign(n, 0);
  progress_total(2 * n);  // two reachability passes, each visiting at most every block once
  // The two passes share nothing but the graph: one thread each.
  std::vector<std::uint8_t> reached, firmly;
  run_workers(2, [&](unsigned pass) { (pass == 0 ? reached : firmly) = reach(g, /*start_pointers_only=*/pass == 1); });
  // One pass over every block, in slices on all cores, reading the block array (the largest thing here)
  // only for the blocks not reached; what follows looks at the leaked blocks alone.
  const unsigned slices = worker_count(n, std::size_t{1} << 20);
  std::vector<std::vector<BlockId>> leaked_in(slices);
  run_workers(slices, [&](unsigned w) {
    const auto [first, last] = slice_of(n, slices, w);
    for (std::size_t b = first; b < last; ++b) {
      out.possibly[b] = reached[b] && !firmly[b];
      if (reached[b]) {
        out.verdict[b] = Verdict::reachable;  // only allocated blocks are reached: no need to read the block
      } else if (is_allocated(heap.blocks[b].state)) {
        out.verdict[b] = Verdict::direct_leak;
        leaked_in[w].push_back(static_cast<BlockId>(b));
      }
    }
  });
  reached = {};
  firmly = {};
  std::vector<BlockId> leaked;  // in block order
  for (const std::vector<BlockId>& slice : leaked_in) leaked.insert(leaked.end(), slice.begin(), slice.end());
  leaked_in = {};

  // A leaked block that another leaked block points to is indirect; what remains direct starts a leak.
  for (const BlockId b : leaked)
    for (std::uint32_t e : g.out_edges(b)) {
      const BlockId t = edge_target(e);
      if (t != b && is_leaked(out.verdict[t])) out.verdict[t] = Verdict::indirect_leak;
    }
  // Leaked blocks no direct leak reaches sit in (or under) cycles with no entry.
  std::vector<std::uint8_t> covered(n, 0);
  std::vector<BlockId> stack;
  for (const BlockId b : leaked)
    if (out.verdict[b] == Verdict::direct_leak) {
      covered[b] = 1;
      stack.push_back(b);
    }
  flood(stack, covered, [&](BlockId b) { return g.out_edges(b); },
        [&](std::uint32_t e) { return is_leaked(out.verdict[edge_target(e)]); });
  for (const BlockId b : leaked)
    if (!covered[b]) out.verdict[b] = Verdict::cycle_leak;
  out.leaked = std::move(leaked);
  return out;
}

}  // namespace heapscope
