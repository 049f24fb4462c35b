#include "queries/retention_paths.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <set>
#include <unordered_map>

#include "queries/block_fields.h"
#include "queries/block_refs.h"
#include "image/word_scan.h"
#include "types/content_naming.h"

namespace heapscope {

namespace {

// Each block the search has reached, with its next step towards the target. Kept in a map while few are
// reached (a short path, as `top`'s suspects have, then costs no array the size of the heap, whose fresh
// pages the kernel must clear) and in such an array once many are.
class StepsToward {
 public:
  explicit StepsToward(std::size_t blocks) : blocks_(blocks) {}
  bool reached(BlockId b) const { return dense_.empty() ? sparse_.contains(b) : dense_[b] != kUnreached; }
  BlockId operator[](BlockId b) const { return dense_.empty() ? sparse_.at(b) : dense_[b]; }
  void set(BlockId b, BlockId next) {
    if (!dense_.empty()) {
      dense_[b] = next;
      return;
    }
    sparse_[b] = next;
    // A map entry costs about ten times an array slot: past a sixty-fourth of the blocks, the array.
    if (sparse_.size() > blocks_ / 64) {
      dense_.assign(blocks_, kUnreached);
      for (const auto& [block, step] : sparse_) dense_[block] = step;
      sparse_ = {};
    }
  }

 private:
  static constexpr BlockId kUnreached = kNoBlock - 1;
  std::size_t blocks_;
  std::unordered_map<BlockId, BlockId> sparse_;
  std::vector<BlockId> dense_;
};

// Follows `toward` (each block's next step towards the target) to build the path from `first`.
RetainerPath make_path(Session& s, const BlockNames& names, RetainedBytes& retained, std::size_t root, BlockId first,
                       const StepsToward& toward) {
  RetainerPath p;
  p.root = root_ref(s, names, root, first);
  Address site = p.root.address;  // the word pointing to the next step (0 for a register: not in memory)
  for (BlockId b = first;; b = toward[b]) {
    PathStep step;
    step.block = block_ref(s, names, b);
    if (site) step.into = landing_offset(s, site, b, b == first ? &s.roots().ranges[root] : nullptr);
    step.retained = retained(b);
    const BlockId next = toward[b];
    if (next != kNoBlock) step.offset = pointer_offset(s, b, next);
    if (step.offset) step.field = field_at(*names.dwarf, names.dwarf->of_block(names.types, b), *step.offset);
    if (step.offset && step.field.empty()) step.field = runtime_field(s, b, *step.offset);
    site = step.offset ? step.block.address + *step.offset : 0;
    p.steps.push_back(std::move(step));
    if (next == kNoBlock) break;
  }
  return p;
}

// What a step of a retainer path costs: a pointer into the middle of a block counts two and a half steps,
// since it is as often a stale word (a key's bytes, a freed neighbour's link) as a reference. Of two paths,
// the one through pointers to block starts is shown unless it is two or more blocks longer.
constexpr std::uint32_t kStartStepCost = 2;
constexpr std::uint32_t kInteriorStepCost = 5;

// A block the search settled, `depth` blocks from the target, whose referrers of one kind (blocks through
// pointers to its start, or into its middle; roots into its middle) the search reaches next, at that kind's
// step cost. The referrers are read from the reverse edges when their cost comes, not queued one by one: a
// block a million others point to (swipl's procedures, a table its entries point back to) then costs one
// entry, and a search that ends a few blocks later never reads the rest. A root's pointer to the block's
// start ends a path at once; one into its middle costs what a block's does over a start pointer.
enum class Referrers : std::uint8_t { start, interior, roots_inside };
struct Expansion {
  BlockId block;
  std::uint32_t depth;
  Referrers referrers;
};

// The expansions waiting at each cost, the search's queue. A step costs at most kInteriorStepCost, so the
// costs still waiting lie within that of the cheapest, and a ring of that many + 1 lists holds them.
class CostBuckets {
 public:
  void push(std::uint32_t cost, Expansion e) {
    ring_[cost % ring_.size()].push_back(e);
    ++waiting_;
  }
  bool empty() const { return waiting_ == 0; }
  // The expansions at `cost`, taken out of the queue.
  std::vector<Expansion> take(std::uint32_t cost) {
    std::vector<Expansion> taken = std::move(ring_[cost % ring_.size()]);
    ring_[cost % ring_.size()].clear();
    waiting_ -= taken.size();
    return taken;
  }

 private:
  std::array<std::vector<Expansion>, kInteriorStepCost + 1> ring_;
  std::size_t waiting_ = 0;
};

// Cheapest first backwards from a target (Dijkstra over the step costs, with a bucket per cost): the first
// blocks settled with a root pointing at them give the paths. Blocks are settled in the order a queue of
// every referrer, pushed as each block settles, would give them.
class RetainerSearch {
 public:
  RetainerSearch(Session& s, const BlockNames& names, RetainedSizes sizes, std::size_t max_paths,
                 std::size_t max_depth, const RootFilter& roots, RetainersReport& report)
      : s_(s), g_(s.graph()), names_(names), retained_(s, sizes), max_paths_(max_paths), max_depth_(max_depth),
        roots_(roots), report_(report), toward_(g_.block_count()) {}

  void run(BlockId target) {
    settle(target, kNoBlock, 1, 0);
    for (std::uint32_t cost = 0; !waiting_.empty() && !done(); ++cost)
      for (const Expansion& from : waiting_.take(cost)) {
        if (from.referrers == Referrers::roots_inside) {
          add_paths(from.block, /*inside=*/true);
          if (done()) return;
          continue;
        }
        const bool interior = from.referrers == Referrers::interior;
        for (const std::uint32_t e : g_.in_edges(from.block)) {
          const BlockId referrer = edge_target(e);
          if (edge_is_interior(e) != interior || toward_.reached(referrer)) continue;
          settle(referrer, from.block, from.depth + 1, cost);
          if (done()) return;  // the rest of this cost's blocks would lead nowhere asked for
        }
      }
  }
  bool cut_at_depth() const { return cut_at_depth_; }

 private:
  bool done() const { return report_.paths.size() >= max_paths_; }

  // `b`, reached at `cost` from `next` (its step towards the target), `depth` blocks from the target.
  void settle(BlockId b, BlockId next, std::uint32_t depth, std::uint32_t cost) {
    toward_.set(b, next);
    if (add_paths(b, /*inside=*/false)) waiting_.push(cost + kInteriorStepCost - kStartStepCost, {b, depth, Referrers::roots_inside});
    if (done()) return;
    if (depth >= max_depth_) {
      cut_at_depth_ = cut_at_depth_ || !g_.in_edges(b).empty();
      return;
    }
    waiting_.push(cost + kStartStepCost, {b, depth, Referrers::start});
    waiting_.push(cost + kInteriorStepCost, {b, depth, Referrers::interior});
  }

  // A path from each root pointing to settled block `b`'s start (or, `inside`, into its middle only) not
  // yet on one: one per root and first block, so one root range (a module's globals, a thread's stack)
  // gives a path through each block it holds; an interpreter's frame first, whose words a program's own
  // names say (a native frame's copy of the same pointer says less). Returns whether a root points only
  // into b's middle.
  bool add_paths(BlockId b, bool inside) {
    bool only_inside = false;
    const auto in_roots = g_.in_root_edges(b);
    if (in_roots.empty()) return false;
    std::vector<std::uint32_t> roots(in_roots.begin(), in_roots.end());
    std::stable_partition(roots.begin(), roots.end(), [&](std::uint32_t root) {
      return s_.roots().ranges[root].kind == RootKind::interpreter_frame;
    });
    for (const std::uint32_t root : roots) {
      if (roots_ && !roots_(root)) continue;
      const auto edges = g_.root_edges(root);
      const bool at_start = std::find(edges.begin(), edges.end(), b) != edges.end();
      if (at_start == inside) {
        only_inside = only_inside || !at_start;
        continue;
      }
      if (done() || !paths_made_.insert({root, b}).second) continue;
      report_.paths.push_back(make_path(s_, names_, retained_, root, b, toward_));
    }
    return only_inside;
  }

  Session& s_;
  const ReferenceGraph& g_;
  const BlockNames& names_;
  RetainedBytes retained_;
  const std::size_t max_paths_, max_depth_;
  const RootFilter& roots_;
  RetainersReport& report_;
  StepsToward toward_;
  CostBuckets waiting_;
  std::set<std::pair<std::size_t, BlockId>> paths_made_;  // (root range, first block)
  bool cut_at_depth_ = false;
};

// The report without the target's verdict: a path alone needs no reachability pass (top's suspects').
RetainersReport search_retainers(Session& s, const BlockNames& names, RetainedSizes sizes, BlockId target,
                                 Address query, std::size_t max_paths, std::size_t max_depth,
                                 const RootFilter& roots = {}) {
  RetainersReport r;
  r.query = query;
  r.target = block_ref(s, names, target);
  if (max_paths == 0) return r;
  RetainerSearch search(s, names, sizes, max_paths, max_depth, roots, r);
  search.run(target);
  r.depth_limited = search.cut_at_depth() && r.paths.size() < max_paths;
  return r;
}

// How far into `target` root `root`'s pointer lands: through the word root_ref found, or for registers
// (no word in memory) through the register's slot.
std::uint64_t root_landing_offset(Session& s, std::size_t root, const RootRef& ref, BlockId target) {
  const RootRange& range = s.roots().ranges[root];
  if (ref.address) return landing_offset(s, ref.address, target, &range);
  if (range.kind != RootKind::registers) return 0;
  const std::vector<Address> sites = s.graph().root_edge_sites(root, target);
  return sites.empty() ? 0 : landing_offset(s, sites.front(), target, &range);
}

}  // namespace

RetainersReport find_retainers(Session& s, const BlockNames& names, RetainedSizes sizes, BlockId target,
                               Address query, std::size_t max_paths, std::size_t max_depth) {
  RetainersReport r = search_retainers(s, names, sizes, target, query, max_paths, max_depth);
  r.verdict = verdict_name(s.verdicts().verdict[target]);
  return r;
}

std::optional<RetainerPath> shortest_retainer_path(Session& s, const BlockNames& names, BlockId target,
                                                  const RootFilter& roots) {
  RetainersReport found = search_retainers(s, names, RetainedSizes::dominator_tree, target,
                                           s.heap().blocks[target].address(), 1, kDefaultPathDepth, roots);
  if (found.paths.empty()) return std::nullopt;
  return std::move(found.paths.front());
}

std::optional<RetainerPath> shortest_retainer_path(Session& s, BlockId target) {
  return shortest_retainer_path(s, s.names(), target);
}

RefsReport find_referrers(Session& s, BlockId target, Address query) {
  const ReferenceGraph& g = s.graph();
  const auto& blocks = s.heap().blocks;
  const BlockId asked[] = {target};
  const BlockNames& names = s.names_for(asked);  // the referrers lead to the target: named with it
  RefsReport r;
  r.query = query;
  r.target = block_ref(s, names, target);
  std::set<BlockId> seen;
  for (std::uint32_t e : g.in_edges(target)) {
    const BlockId from = edge_target(e);
    if (!seen.insert(from).second) continue;  // one entry per pointer word: the edge's sites
    for (const Address at : g.edge_sites(from, target))
      r.referrers.push_back({block_ref(s, names, from), at - blocks[from].address(),
                             runtime_field(s, from, at - blocks[from].address()), std::nullopt,
                             landing_offset(s, at, target)});
  }
  std::set<std::uint32_t> roots(g.in_root_edges(target).begin(), g.in_root_edges(target).end());
  for (std::uint32_t root : roots) {
    Referrer ref;
    ref.root = root_ref(s, names, root, target);
    ref.into = root_landing_offset(s, root, *ref.root, target);
    r.referrers.push_back(std::move(ref));
  }
  return r;
}

DescribeReport describe_block(Session& s, BlockId target, Address query, std::size_t dump_bytes,
                              std::size_t max_fields) {
  const HeapModel& heap = s.heap();
  const Block& b = heap.blocks[target];
  // The block and every block a word of it points into, named together: what its pointers and fields name.
  // Not only its edges: a runtime's header links (CPython's PyGC_Head) are no edges, yet describe shows
  // where they point. The words that point somewhere are kept for the pointers' list, looked up once.
  struct PointerWord {
    Address at;
    std::uint64_t value;
    BlockId to;
  };
  std::vector<PointerWord> pointer_words;
  std::vector<BlockId> asked{target};
  const BlockIndex& index = s.graph().index();
  for_each_word(s.image(), b.address(), b.address() + b.usable_size(), [&](Address at, std::uint64_t w) {
    const BlockId to = index.find(w);
    if (to != kNoBlock) asked.push_back(to);
    if (to != kNoBlock || s.image().module_at(w)) pointer_words.push_back({at, w, to});
  });
  const BlockNames& names = s.names_for(asked);
  DescribeReport r;
  r.query = query;
  r.block = block_ref(s, names, target);
  r.chunk = b.chunk;
  r.chunk_size = b.chunk_size();
  r.state = block_state_name(b.state);
  r.text = text_preview(s.image(), b).value_or("");
  r.arena = b.arena == Block::kNoArena ? 0 : heap.arenas[b.arena].address;
  r.verdict = verdict_name(s.verdicts().verdict[target]);
  r.possibly = s.verdicts().possibly[target] != 0;
  r.dump_address = b.address();
  r.dump.resize(std::min<std::uint64_t>(dump_bytes, b.usable_size()));
  r.dump.resize(s.image().read(b.address(), r.dump.data(), r.dump.size()));

  for (const PointerWord& p : pointer_words) {
    std::string where = pointer_target(s, names, p.value, p.to);
    if (where.empty()) continue;  // not a pointer to anything heapscope can name
    r.pointers.push_back({p.at - b.address(), p.value, std::move(where), runtime_field(s, target, p.at - b.address())});
  }
  BlockFields fields = block_fields(s, names, target, max_fields);
  r.fields_type = std::move(fields.type);
  // Fields read through a guessed layout are as much a guess as the name.
  if (!r.fields_type.empty() && names.types.naming(target) == Naming::inferred) r.fields_type += kInferredMark;
  r.fields = std::move(fields.rows);
  r.fields_truncated = fields.truncated;
  return r;
}

}  // namespace heapscope
