#include "queries/retention_paths.h"

#include <fmt/format.h>

#include <algorithm>
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
    if (const auto word = site ? s.image().read_u64(site) : std::nullopt; word && *word > step.block.address)
      step.into = *word - step.block.address;
    step.retained = retained(b);
    const BlockId next = toward[b];
    if (next != kNoBlock) step.offset = pointer_offset(s, b, next);
    if (step.offset) step.field = field_at(*names.dwarf, names.dwarf->of_block(names.types, b), *step.offset);
    site = step.offset ? step.block.address + *step.offset : 0;
    p.steps.push_back(std::move(step));
    if (next == kNoBlock) break;
  }
  return p;
}

// The report without the target's verdict: a path alone needs no reachability pass (top's suspects').
RetainersReport search_retainers(Session& s, const BlockNames& names, RetainedSizes sizes, BlockId target,
                                 Address query, std::size_t max_paths, std::size_t max_depth) {
  const ReferenceGraph& g = s.graph();
  RetainedBytes retained(s, sizes);
  RetainersReport r;
  r.query = query;
  r.target = block_ref(s, names, target);

  // Breadth-first backwards from the target: the first blocks found with a root pointing at them give
  // the shortest paths.
  StepsToward toward(g.block_count());
  toward.set(target, kNoBlock);
  std::vector<BlockId> level{target};
  std::set<std::size_t> roots_used;
  for (std::size_t depth = 1; !level.empty() && r.paths.size() < max_paths; ++depth) {
    for (BlockId b : level) {
      for (std::uint32_t root : g.in_root_edges(b)) {
        if (r.paths.size() >= max_paths || !roots_used.insert(root).second) continue;
        r.paths.push_back(make_path(s, names, retained, root, b, toward));
      }
    }
    if (depth >= max_depth) {
      r.depth_limited = r.paths.size() < max_paths;
      break;
    }
    std::vector<BlockId> next;
    for (BlockId b : level)
      for (std::uint32_t e : g.in_edges(b)) {
        const BlockId from = edge_target(e);
        if (toward.reached(from)) continue;
        toward.set(from, b);
        next.push_back(from);
      }
    level = std::move(next);
  }
  return r;
}

}  // namespace

RetainersReport find_retainers(Session& s, const BlockNames& names, RetainedSizes sizes, BlockId target,
                               Address query, std::size_t max_paths, std::size_t max_depth) {
  RetainersReport r = search_retainers(s, names, sizes, target, query, max_paths, max_depth);
  r.verdict = verdict_name(s.verdicts().verdict[target]);
  return r;
}

std::optional<RetainerPath> shortest_retainer_path(Session& s, const BlockNames& names, BlockId target) {
  RetainersReport found = search_retainers(s, names, RetainedSizes::dominator_tree, target,
                                           s.heap().blocks[target].address(), 1, kDefaultPathDepth);
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
      r.referrers.push_back({block_ref(s, names, from), at - blocks[from].address(), std::nullopt});
  }
  std::set<std::uint32_t> roots(g.in_root_edges(target).begin(), g.in_root_edges(target).end());
  for (std::uint32_t root : roots) {
    Referrer ref;
    ref.root = root_ref(s, names, root, target);
    r.referrers.push_back(std::move(ref));
  }
  return r;
}

DescribeReport describe_block(Session& s, BlockId target, Address query, std::size_t dump_bytes,
                              std::size_t max_fields) {
  const HeapModel& heap = s.heap();
  const Block& b = heap.blocks[target];
  // The block and what it points to, named together.
  std::vector<BlockId> asked{target};
  for (std::uint32_t e : s.graph().out_edges(target)) asked.push_back(edge_target(e));
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

  for_each_word(s.image(), b.address(), b.address() + b.usable_size(), [&](Address at, std::uint64_t w) {
    std::string where = pointer_target(s, names, w);
    if (where.empty()) return;  // not a pointer to anything heapscope can name
    r.pointers.push_back({at - b.address(), w, std::move(where)});
  });
  BlockFields fields = block_fields(s, names, target, max_fields);
  r.fields_type = std::move(fields.type);
  // Fields read through a guessed layout are as much a guess as the name.
  if (!r.fields_type.empty() && names.types.naming(target) == Naming::inferred) r.fields_type += kInferredMark;
  r.fields = std::move(fields.rows);
  r.fields_truncated = fields.truncated;
  return r;
}

}  // namespace heapscope
