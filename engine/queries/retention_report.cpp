#include "queries/retention_report.h"

#include <algorithm>
#include <optional>
#include <limits>
#include <cmath>
#include <functional>
#include <queue>
#include <unordered_map>

#include "model/dominator_walk.h"
#include "queries/allocation_sites.h"
#include "queries/block_refs.h"
#include "queries/retention_paths.h"
#include "types/type_groups.h"
#include "base/phase_timer.h"
#include "base/progress.h"
#include "base/workers.h"

namespace heapscope {

namespace {

double percent_of_heap(const Retention& r, std::uint64_t bytes) {
  return r.in_use_bytes() ? 100.0 * static_cast<double>(bytes) / static_cast<double>(r.in_use_bytes()) : 0;
}

RootNodeRef root_node_ref(Session& s, const Retention& r, const RootNode& n) {
  RootNodeRef ref;
  const bool part = n.level == RootNode::Level::part;
  ref.kind = part ? root_kind_name(n.kind) : owner_kind_name(n.owner_kind);
  ref.label = n.label;
  for (const RootNode* up = &n; up->level == RootNode::Level::part && up->parent != RootNode::kNoParent;) {
    up = &r.root_nodes()[up->parent];
    ++ref.depth;
    ref.owner = up->label;
  }
  ref.symbol = n.symbol;
  ref.module = n.module;
  const auto& threads = s.image().threads();
  if (n.thread < threads.size()) ref.tid = threads[n.thread].tid;
  ref.address = n.address;
  return ref;
}

// What the registrations of finalizers hold between them, as a suspect names it.
constexpr const char* kValuesWithFinalizers = "values with finalizers";

Holder holder_of(Session& s, const BlockNames& names, const Retention& r, std::uint32_t node) {
  Holder h;
  if (r.is_block(node)) {
    h.block = block_ref(s, names, node);
  } else if (r.is_holder(node)) {
    h.root = root_node_ref(s, r, r.root(node));
  } else if (node == r.owner_kind_node(OwnerKind::finalizer)) {
    h.root = root_node_ref(s, r, r.root(node));
    h.root->label = kValuesWithFinalizers;
  }
  return h;
}

// The retained bytes at which a node is a big retainer (at least 1 byte, so an empty heap has none).
std::uint64_t big_retainer_threshold(const Retention& r) {
  return std::max<std::uint64_t>(
      1, static_cast<std::uint64_t>(std::ceil(static_cast<double>(r.in_use_bytes()) * kBigRetainerShare)));
}

// The ownership tree's children of each root node (index into root_nodes()), largest first.
std::vector<std::vector<std::uint32_t>> root_children(const Retention& r) {
  std::vector<std::vector<std::uint32_t>> children(r.root_nodes().size());
  for (std::uint32_t i = 0; i < r.root_nodes().size(); ++i)
    if (const std::uint32_t parent = r.root_nodes()[i].parent; parent != RootNode::kNoParent) children[parent].push_back(i);
  for (auto& list : children)
    std::stable_sort(list.begin(), list.end(), [&](std::uint32_t a, std::uint32_t b) {
      return r.retained_bytes(r.root_node_id(a)) > r.retained_bytes(r.root_node_id(b));
    });
  return children;
}

// ---- top --by block / root / type ----

// The `count` blocks that retain most (the lower id first among equals): each worker keeps the best of its
// slice, and the best of those are the best of all.
std::vector<TopBlockRow> top_blocks(Session& s, const BlockNames& names, const Retention& r, std::size_t count) {
  using Entry = std::pair<std::uint64_t, std::int64_t>;  // (retained bytes, -block): greater is better
  using Best = std::priority_queue<Entry, std::vector<Entry>, std::greater<>>;  // the least of the best on top
  auto offer = [count](Best& best, const Entry& e) {
    if (best.size() == count && e <= best.top()) return;
    best.push(e);
    if (best.size() > count) best.pop();
  };
  const unsigned n = worker_count(r.block_count(), kBlocksPerWorker);
  std::vector<Best> slices(n);
  run_workers(n, [&](unsigned w) {
    const auto [first, last] = slice_of(r.block_count(), n, w);
    Best& best = slices[w];
    std::uint64_t floor = 0;  // once `best` is full, a block must retain more than its least to enter
    for (std::size_t b = first; b < last; ++b) {
      if ((b & kCheckMask) == 0) progress_check();
      const auto block = static_cast<BlockId>(b);
      if (!r.reachable(block) || r.retained_bytes(block) < floor) continue;
      offer(best, {r.retained_bytes(block), -static_cast<std::int64_t>(b)});
      if (best.size() == count) floor = best.top().first;
    }
  });
  Best best;
  for (Best& slice : slices)
    for (; !slice.empty(); slice.pop()) offer(best, slice.top());
  std::vector<TopBlockRow> rows(best.size());
  for (std::size_t i = rows.size(); i-- > 0; best.pop()) {
    const auto b = static_cast<BlockId>(-best.top().second);
    rows[i].block = block_ref(s, names, b);
    rows[i].retained = retained_of(r, b);
  }
  return rows;
}

// The `count` owners that retain most, each followed, depth first, by its parts that retain anything.
std::vector<TopRootRow> top_roots(Session& s, const Retention& r, std::size_t count) {
  std::vector<std::uint32_t> owners;
  for (std::uint32_t i = 0; i < r.root_nodes().size(); ++i)
    if (r.root_nodes()[i].level == RootNode::Level::owner) owners.push_back(i);
  std::stable_sort(owners.begin(), owners.end(), [&](std::uint32_t a, std::uint32_t b) {
    return r.retained_bytes(r.root_node_id(a)) > r.retained_bytes(r.root_node_id(b));
  });
  if (count && owners.size() > count) owners.resize(count);
  const std::vector<std::vector<std::uint32_t>> children = root_children(r);
  std::vector<TopRootRow> rows;
  std::vector<std::uint32_t> pending;
  for (std::uint32_t owner : owners) {
    pending.push_back(owner);
    while (!pending.empty()) {
      const std::uint32_t i = pending.back();
      pending.pop_back();
      const std::uint32_t node = r.root_node_id(i);
      rows.push_back({root_node_ref(s, r, r.root_nodes()[i]), retained_of(r, node)});
      for (auto it = children[i].rbegin(); it != children[i].rend(); ++it)
        if (r.retained_bytes(r.root_node_id(*it)) > 0) pending.push_back(*it);
    }
  }
  return rows;
}

// Per group (a type, an allocation site): reachable instances, and what they retain. An instance dominated
// by another instance of its group is inside that one's retained size already, so only the outermost ones
// count (a depth-first walk of the dominator tree keeps, per group, how many instances are on the path from
// the super-root). `groups` gives a block's group (of) and a group's name (name).
template <class Groups, class Decorate>
std::vector<TopTypeRow> top_groups(const HeapModel& heap, Groups&& groups, const Retention& r, std::size_t count,
                                   Decorate&& decorate) {
  // The dominator tree's children, in CSR form.
  std::vector<std::uint32_t> offsets(r.node_count() + 1, 0);
  for (std::uint32_t v = 0; v < r.node_count(); ++v)
    if (r.dominator(v) != kNoNode) ++offsets[r.dominator(v) + 1];
  for (std::size_t i = 1; i < offsets.size(); ++i) offsets[i] += offsets[i - 1];
  std::vector<std::uint32_t> children(offsets.back());
  {
    std::vector<std::uint32_t> fill(offsets.begin(), offsets.end() - 1);
    for (std::uint32_t v = 0; v < r.node_count(); ++v)
      if (r.dominator(v) != kNoNode) children[fill[r.dominator(v)]++] = v;
  }

  std::vector<TopTypeRow> rows;
  std::vector<std::uint32_t> on_path;  // per group: instances on the current dominator-tree path
  constexpr std::uint32_t kLeave = 0x80000000u;
  std::vector<std::uint32_t> stack{r.super_root()};
  while (!stack.empty()) {
    const std::uint32_t item = stack.back();
    stack.pop_back();
    const std::uint32_t node = item & ~kLeave;
    if (item & kLeave) {
      --on_path[groups.of(node)];
      continue;
    }
    if (r.is_block(node)) {
      const std::uint32_t g = groups.of(node);
      if (g >= rows.size()) {
        rows.resize(g + 1);
        on_path.resize(g + 1, 0);
      }
      TopTypeRow& row = rows[g];
      ++row.count;
      row.bytes += heap.blocks[node].usable_size();
      if (on_path[g]++ == 0) {
        row.retained.bytes += r.retained_bytes(node);
        row.retained.blocks += r.retained_blocks(node);
      }
      stack.push_back(node | kLeave);
    }
    for (std::uint32_t i = offsets[node]; i < offsets[node + 1]; ++i) stack.push_back(children[i]);
  }
  for (std::uint32_t g = 0; g < rows.size(); ++g) {
    rows[g].type = groups.name(g);
    decorate(rows[g], g);
    rows[g].retained.percent = percent_of_heap(r, rows[g].retained.bytes);
  }
  std::stable_sort(rows.begin(), rows.end(), [](const TopTypeRow& a, const TopTypeRow& b) {
    return a.retained.bytes != b.retained.bytes ? a.retained.bytes > b.retained.bytes : a.bytes > b.bytes;
  });
  if (rows.size() > count) rows.resize(count);
  return rows;
}

std::vector<TopTypeRow> top_types(Session& s, const BlockNames& names, const Retention& r, std::size_t count) {
  return top_groups(s.heap(), TypeGroups(s.heap(), names.types), r, count, [](TopTypeRow&, std::uint32_t) {});
}

// Allocation sites as groups of blocks: a site's index, the blocks without one after the last.
class SiteGroups {
 public:
  explicit SiteGroups(const Provenance& p) : p_(p), site_(p.blocks.empty() ? 0 : p.blocks.back().block + 1, none()) {
    for (const SampledBlock& b : p.blocks) site_[b.block] = b.site;
  }
  std::uint32_t of(std::uint32_t block) const { return block < site_.size() ? site_[block] : none(); }
  std::string name(std::uint32_t g) const {
    if (g == none()) return "(no allocation site)";
    const std::vector<Frame>& frames = p_.sites[g].frames;
    if (frames.size() < 2) return p_.sites[g].label();
    return frames[0].describe() + " ← " + frames[1].describe();
  }
  std::uint32_t none() const { return static_cast<std::uint32_t>(p_.sites.size()); }

 private:
  const Provenance& p_;
  std::vector<std::uint32_t> site_;  // by block id, up to the last sampled block
};

std::vector<TopTypeRow> top_sites(Session& s, const Retention& r, std::size_t count) {
  const Provenance& p = s.provenance();
  if (!p.present()) throw AnalysisError(sites_note(p).sentence);
  std::vector<TopTypeRow> rows = top_groups(s.heap(), SiteGroups(p), r, count, [&](TopTypeRow& row, std::uint32_t g) {
    if (g < p.sites.size()) row.site = site_ref(p, g);
  });
  // A site whose blocks all leaked has no reachable block: no row (they sort last, with nothing retained).
  std::erase_if(rows, [](const TopTypeRow& row) { return row.count == 0; });
  return rows;
}

// ---- suspects ----

// The part of an owner that explains its retention: going down the ownership tree through the part that
// retains most, while that part still retains most (80%) of what the one above it does — a module's one
// big global variable, a thread's one frame and variable.
std::uint32_t explaining_part(const Retention& r, const std::vector<std::vector<std::uint32_t>>& children,
                              std::uint32_t node) {
  constexpr double kMostOf = 0.8;
  for (;;) {
    const std::vector<std::uint32_t>& below = children[node - r.block_count()];
    if (below.empty()) return node;
    const std::uint32_t largest = r.root_node_id(below.front());
    if (static_cast<double>(r.retained_bytes(largest)) < kMostOf * static_cast<double>(r.retained_bytes(node)))
      return node;
    node = largest;
  }
}

// Owners (or the part of one that explains it), and blocks no owner alone dominates (held by several),
// that retain a large share of the heap: the outermost big retainers. Largest first.
// `heavy`: the nodes retaining at least the threshold's kMostOf share (nodes_retaining), in id order.
std::vector<std::uint32_t> big_retainers(const Retention& r, std::span<const std::uint32_t> heavy) {
  const std::uint64_t threshold = big_retainer_threshold(r);
  const std::vector<std::vector<std::uint32_t>> children = root_children(r);
  std::vector<std::uint32_t> out;
  for (const std::uint32_t node : heavy) {
    if (r.retained_bytes(node) < threshold) continue;
    if (r.is_root(node) && r.root(node).level == RootNode::Level::owner) out.push_back(explaining_part(r, children, node));
    else if (r.is_block(node) && !r.is_holder(r.dominator(node))) out.push_back(node);
  }
  // Finalizers are registered one per object (a garbage collector's), so what they keep alive is spread
  // over many small owners none of which is a big retainer: when together they are, they are the suspect.
  const std::uint32_t finalizers = r.owner_kind_node(OwnerKind::finalizer);
  if (finalizers != kNoNode && r.retained_bytes(finalizers) >= threshold &&
      std::none_of(out.begin(), out.end(), [&](std::uint32_t node) {
        return r.is_root(node) && r.root(node).owner_kind == OwnerKind::finalizer;
      }))
    out.push_back(finalizers);
  std::stable_sort(out.begin(), out.end(),
                   [&](std::uint32_t a, std::uint32_t b) { return r.retained_bytes(a) > r.retained_bytes(b); });
  return out;
}

// Whether root range `range` is memory of `owner` (an owner node of the ownership tree): a thread's
// registers, stack, TLS and interpreter frames are its thread's, a module's writable data its globals', a mapping its own.
// Owners of other kinds (registrations, exited threads) hold pieces of those: any range may be theirs.
bool owned_by(const Image& image, const RootRange& range, const RootNode& owner) {
  switch (owner.owner_kind) {
    case OwnerKind::thread:
      return range.thread == owner.thread && (range.kind == RootKind::registers || range.kind == RootKind::stack ||
                                              range.kind == RootKind::tls || range.kind == RootKind::dynamic_tls ||
                                              range.kind == RootKind::interpreter_frame);
    case OwnerKind::global:
      return range.kind == RootKind::global && range.module < image.modules().size() &&
             image.modules()[range.module].name() == owner.module;
    case OwnerKind::anonymous:
      return range.kind == RootKind::anonymous && range.start <= owner.address && owner.address < range.end;
    default:
      return true;
  }
}

// The shortest path to `node` when it is a block, from the memory of the owner that `holder` is or is part
// of: a suspect's path starts where its header says the bytes are held ("globals of app" is not
// illustrated by a register's pointer). None when no such root reaches it.
std::optional<RetainerPath> shortest_path(Session& s, const BlockNames& names, const Retention& r,
                                          std::uint32_t node, std::uint32_t holder) {
  if (!r.is_block(node)) return std::nullopt;
  if (!r.is_holder(holder) || r.is_block(holder)) return shortest_retainer_path(s, names, node);
  std::uint32_t owner = holder - r.block_count();  // the holder's index among the root nodes, up to its owner
  while (r.root_nodes()[owner].level == RootNode::Level::part && r.root_nodes()[owner].parent != RootNode::kNoParent)
    owner = r.root_nodes()[owner].parent;
  const RootNode& held_by = r.root_nodes()[owner];
  const RootSet& roots = s.roots();
  return shortest_retainer_path(s, names, node,
                                [&](std::size_t root) { return owned_by(s.image(), roots.ranges[root], held_by); });
}

// The reachable nodes but the super-root that retain at least `least` bytes, in id order: one pass on all
// cores over the whole tree, for the few nodes the suspects are looked for among.
std::vector<std::uint32_t> nodes_retaining(const Retention& r, std::uint64_t least) {
  return collect_in_slices<std::uint32_t>(r.node_count(), kBlocksPerWorker, [&](std::size_t v, auto& out) {
    const auto node = static_cast<std::uint32_t>(v);
    if (node != r.super_root() && r.reachable(node) && r.retained_bytes(node) >= least) out.push_back(node);
  });
}

// Eclipse MAT's accumulation point: going down from a big retainer through the node that retains the
// most, the last one still holding most of it. The descent stops at a node whose largest child is of its
// own type: a list or a tree is named by its first node, not somewhere along it.
class AccumulationPoints {
 public:
  static constexpr double kMostOf = 0.8;

  // Every step of a descent goes to a node retaining most of a big retainer's bytes, so at least kMostOf of
  // the threshold: those few nodes (`heavy`, heavy_nodes) are the only ones a step looks at (a pass over the
  // whole tree per step took half a second at 20M blocks).
  AccumulationPoints(const Retention& r, const TypeGroups& groups, std::span<const std::uint32_t> heavy)
      : r_(r), groups_(groups), heavy_(heavy) {}

  // The nodes a descent may step to: retaining kMostOf of `threshold` or more, in id order.
  static std::vector<std::uint32_t> heavy_nodes(const Retention& r, std::uint64_t threshold) {
    return nodes_retaining(r, static_cast<std::uint64_t>(kMostOf * static_cast<double>(threshold)));
  }

  std::uint32_t of(std::uint32_t holder) const {
    constexpr int kMaxSteps = 32;
    const auto enough = static_cast<std::uint64_t>(kMostOf * static_cast<double>(r_.retained_bytes(holder)));
    std::uint32_t at = holder;
    for (int step = 0; step < kMaxSteps; ++step) {
      const std::uint32_t next = largest_heavy_child(at);
      if (next == kNoNode || r_.retained_bytes(next) < enough) break;
      if (r_.is_block(at) && r_.is_block(next) && groups_.same(at, next)) break;
      at = next;
    }
    return at;
  }

 private:
  // The heavy node `node` dominates that retains the most, the first in id order among equals; kNoNode when
  // it dominates none (its largest child, if any, then retains too little for a step).
  std::uint32_t largest_heavy_child(std::uint32_t node) const {
    std::uint32_t best = kNoNode;
    for (const std::uint32_t v : heavy_)
      if (r_.dominator(v) == node && (best == kNoNode || r_.retained_bytes(v) > r_.retained_bytes(best))) best = v;
    return best;
  }

  const Retention& r_;
  const TypeGroups& groups_;
  std::span<const std::uint32_t> heavy_;  // in id order
};

struct GroupTotal {
  std::uint64_t count = 0, bytes = 0;
};

// Big retainers first (largest first), then accumulations (most bytes first).
class SuspectFinder {
 public:
  SuspectFinder(Session& s, const BlockNames& names, const Retention& r)
      : s_(s), names_(names), r_(r), heap_(s.heap()), groups_(heap_, names.types),
        threshold_(big_retainer_threshold(r)) {
    // The heavy nodes are many where a long list retains a share of the heap (each of its first nodes
    // retains most of it: 700,000 on swipl): gone before the walks.
    const std::vector<std::uint32_t> heavy = AccumulationPoints::heavy_nodes(r, threshold_);
    big_ = big_retainers(r, heavy);
    const AccumulationPoints points(r, groups_, heavy);
    for (const std::uint32_t big : big_) points_.push_back(points.of(big));
  }

  std::vector<Suspect> find() {
    const std::vector<Pile> piles = tally();
    std::vector<Suspect> out;
    for (std::size_t i = 0; i < owned_.size(); ++i) out.push_back(big_retainer(i));
    for (const Pile& pile : piles) out.push_back(accumulation(pile));
    return out;
  }

 private:
  using Pile = std::pair<std::uint64_t, GroupTotal>;  // (dominator << 32 | group) → instances

  // Big retainers retain a share of the heap each and none lies inside another: few enough for the walk.
  static_assert(1.0 / kBigRetainerShare <= kMaxOwners);

  // The totals per type of what each big retainer holds, then the piles, each from a walk down the tree
  // (model/dominator_walk.h), by slices on all cores: the owners' walk tallies each block as it goes, the
  // piles' are tallied in a pass in block order once every pile's count is known; the largest piles come
  // back, most bytes first. The owners' walk's array is gone before the piles' are made, and those before
  // the paths are searched, which take memory of their own. A block's group is looked up where it is
  // needed rather than kept per block (4 bytes a block); groups are numbered first, in block order, the
  // order that breaks ties.
  std::vector<Pile> tally() {
    groups_.number_in_block_order(r_.block_count(), [&](BlockId b) { return r_.reachable(b); });
    owned_ = total_owned();
    return largest(total_piles(Piles(r_, [this](BlockId a, BlockId b) { return groups_.same(a, b); })));
  }

  std::size_t walk_owners() const { return std::min<std::size_t>(big_.size(), kMaxOwners); }

  // Calls add(out, b) for each reachable block b, by slices on all cores, each slice into its own `Out`;
  // gives those.
  template <class Out, class Add>
  std::vector<Out> per_slice(Add&& add) const {
    const unsigned n = worker_count(r_.block_count(), kBlocksPerWorker);
    std::vector<Out> slices(n);
    run_workers(n, [&](unsigned w) {
      const auto [first, last] = slice_of(r_.block_count(), n, w);
      for (auto b = static_cast<BlockId>(first); b < last; ++b) {
        if ((b & kCheckMask) == 0) progress_check();
        if (r_.reachable(b)) add(slices[w], b);
      }
    });
    return slices;
  }

  GroupTotal one_block(BlockId b) const { return {1, heap_.blocks[b].usable_size()}; }

  // Per big retainer and group: the reachable blocks it holds, tallied as the owners' walk settles each.
  std::vector<std::vector<GroupTotal>> total_owned() const {
    using Owned = std::vector<std::vector<GroupTotal>>;
    const unsigned workers = worker_count(r_.block_count(), kBlocksPerWorker);
    std::vector<Owned> slices(workers);
    owners_of_nodes(r_, std::span(big_).first(walk_owners()), workers, [&](unsigned w, BlockId b, OwnerIndex owner) {
      if (owner == kNoOwner) return;
      Owned& out = slices[w];
      if (out.size() <= owner) out.resize(walk_owners());
      std::vector<GroupTotal>& totals = out[owner];
      const std::uint32_t group = groups_.numbered_group(b);
      if (group >= totals.size()) totals.resize(group + 1);
      add(totals[group], one_block(b));
    });
    Owned owned(walk_owners());
    for (const Owned& slice : slices)
      for (std::size_t o = 0; o < slice.size(); ++o) add_totals(owned[o], slice[o]);
    return owned;
  }

  // Per pile (dominator and group): its blocks. A pile counts only under a block, an owner or a part (a
  // kind or the super-root is no one dominator), and only where enough blocks accumulate for one type to
  // possibly pass the bar: the blocks piling up under a node, of every type, bound each of its piles.
  // (Along a long list of two alternating types, every node retains the rest of the list, a share of the
  // heap, and has one block piling up under it: swipl's clauses made 660,000 piles of one block each, 40
  // MB and half of `top`'s own time, before the count was asked first.)
  std::unordered_map<std::uint64_t, GroupTotal> total_piles(const Piles& piles) const {
    auto candidate = [&](std::uint32_t node) {
      if (!r_.is_holder(node)) return false;
      const std::uint64_t piled = piles.count(node);
      return piled >= kAccumulationInstances || (piled >= kAccumulationMinInstances && r_.retained_bytes(node) >= threshold_);
    };
    // Neighbouring blocks mostly pile up in one place (a list's nodes, allocated together): the last pile
    // is asked first (the map's elements stay where they are as it grows).
    struct Slice {
      std::unordered_map<std::uint64_t, GroupTotal> piles;
      std::uint64_t last_key = ~std::uint64_t{0};
      GroupTotal* last = nullptr;
      std::uint32_t last_under = kNoNode;  // and whether it is a candidate
      bool last_candidate = false;
    };
    std::vector<Slice> slices = per_slice<Slice>([&](Slice& out, BlockId b) {
      const std::uint32_t under = piles.under(b);
      if (under != out.last_under) {
        out.last_under = under;
        out.last_candidate = candidate(under);
      }
      if (!out.last_candidate) return;
      const std::uint64_t key = std::uint64_t{under} << 32 | groups_.numbered_group(b);
      if (key != out.last_key) {
        out.last = &out.piles[key];
        out.last_key = key;
      }
      add(*out.last, one_block(b));
    });
    std::unordered_map<std::uint64_t, GroupTotal> all = std::move(slices.front().piles);
    for (std::size_t i = 1; i < slices.size(); ++i)
      for (const auto& [key, t] : slices[i].piles) add(all[key], t);
    return all;
  }

  static void add(GroupTotal& sum, const GroupTotal& more) {
    sum.count += more.count;
    sum.bytes += more.bytes;
  }
  static void add_totals(std::vector<GroupTotal>& sums, const std::vector<GroupTotal>& more) {
    if (more.size() > sums.size()) sums.resize(more.size());
    for (std::size_t g = 0; g < more.size(); ++g) add(sums[g], more[g]);
  }

  // The piles that pass the bar, most bytes first (the key breaks ties), at most kMaxAccumulationSuspects.
  std::vector<Pile> largest(const std::unordered_map<std::uint64_t, GroupTotal>& piles) const {
    std::vector<Pile> found;
    for (const auto& [key, t] : piles)
      if (t.count >= kAccumulationInstances || (t.bytes >= threshold_ && t.count >= kAccumulationMinInstances))
        found.emplace_back(key, t);
    std::sort(found.begin(), found.end(), [](const Pile& a, const Pile& b) {
      return a.second.bytes != b.second.bytes ? a.second.bytes > b.second.bytes : a.first < b.first;
    });
    if (found.size() > kMaxAccumulationSuspects) found.resize(kMaxAccumulationSuspects);
    return found;
  }

  Suspect big_retainer(std::size_t i) {
    Suspect sus;
    sus.kind = Suspect::Kind::big_retainer;
    sus.holder = holder_of(s_, names_, r_, big_[i]);
    sus.retained = retained_of(r_, big_[i]);
    const std::uint32_t point = points_[i];
    if (point != big_[i]) {
      sus.accumulation_point = holder_of(s_, names_, r_, point);
      sus.accumulation_retained = retained_of(r_, point);
    }
    const std::vector<GroupTotal>& totals = owned_[i];
    std::vector<std::uint32_t> order(totals.size());
    for (std::uint32_t g = 0; g < order.size(); ++g) order[g] = g;
    std::stable_sort(order.begin(), order.end(),
                     [&](std::uint32_t a, std::uint32_t b) { return totals[a].bytes > totals[b].bytes; });
    for (std::uint32_t g : order) {
      if (sus.retained_types.size() == kRetainedTypesPerSuspect || totals[g].count == 0) break;
      TopTypeRow row;
      row.type = groups_.name(g);
      row.count = totals[g].count;
      row.bytes = totals[g].bytes;
      sus.retained_types.push_back(std::move(row));
    }
    sus.path = shortest_path(s_, names_, r_, point, big_[i]);
    return sus;
  }

  Suspect accumulation(const Pile& pile) {
    const auto holder = static_cast<std::uint32_t>(pile.first >> 32);
    Suspect sus;
    sus.kind = Suspect::Kind::accumulation;
    sus.holder = holder_of(s_, names_, r_, holder);
    sus.retained = retained_of(r_, holder);
    sus.type = groups_.name(static_cast<std::uint32_t>(pile.first & 0xffffffffu));
    sus.instances = pile.second.count;
    sus.instance_bytes = pile.second.bytes;
    sus.path = shortest_path(s_, names_, r_, holder, holder);
    return sus;
  }

  Session& s_;
  const BlockNames& names_;
  const Retention& r_;
  const HeapModel& heap_;
  TypeGroups groups_;
  const std::uint64_t threshold_;
  std::vector<std::uint32_t> big_;
  std::vector<std::uint32_t> points_;  // per big retainer: its accumulation point (AccumulationPoints)
  std::vector<std::vector<GroupTotal>> owned_;  // per big retainer, per group
};

// Per kind of thread part (registers, stack, static TLS, dynamic TLS): what each thread's part alone keeps
// alive, summed over threads. What a thread's parts share (a buffer its register and its stack both point
// to) is the thread's, in no part.
std::vector<RootPartTotal> thread_part_totals(const Retention& r) {
  std::vector<RootPartTotal> totals;
  for (RootKind kind : {RootKind::registers, RootKind::stack, RootKind::tls, RootKind::dynamic_tls}) {
    RootPartTotal total{root_kind_name(kind), 0, 0};
    for (std::uint32_t i = 0; i < r.root_nodes().size(); ++i) {
      const RootNode& n = r.root_nodes()[i];
      const bool thread_part = n.parent != RootNode::kNoParent && r.root_nodes()[n.parent].level == RootNode::Level::owner;
      if (!thread_part || n.owner_kind != OwnerKind::thread || n.kind != kind) continue;
      total.bytes += r.retained_bytes(r.root_node_id(i));
      total.blocks += r.retained_blocks(r.root_node_id(i));
    }
    totals.push_back(total);
  }
  return totals;
}

}  // namespace

Retained retained_of(const Retention& r, std::uint32_t node) {
  return retained_total(r, r.retained_bytes(node), r.retained_blocks(node));
}

Retained retained_total(const Retention& r, std::uint64_t bytes, std::uint64_t blocks) {
  return {bytes, blocks, percent_of_heap(r, bytes)};
}

HeapTotals heap_totals(const Retention& r) {
  HeapTotals t;
  t.in_use_bytes = r.in_use_bytes();
  t.in_use_blocks = r.in_use_blocks();
  t.reachable_bytes = r.retained_bytes(r.super_root());
  t.reachable_blocks = r.retained_blocks(r.super_root());
  return t;
}

const char* top_by_name(TopBy by) {
  switch (by) {
    case TopBy::block: return "block";
    case TopBy::type: return "type";
    case TopBy::site: return "site";
    case TopBy::root: return "root";
  }
  return "?";
}

TopReport build_top_report(Session& s, TopBy by, std::size_t count) {
  if (count == 0) count = std::numeric_limits<std::size_t>::max();  // -n 0: all
  // The names need the DWARF index of each module whose data points to a block, and both the names and
  // the tree need the call stacks; none of these needs the heap: they are computed on a thread of their own
  // while the heap is walked and scanned. Which modules point to blocks is known once the roots and the
  // block index are: a module the thread comes to after that is skipped when its data points to none (the
  // names would not read its index; a module it comes to before is indexed whether or not).
  const Session::Ahead ahead(s, [&s](const std::atomic<bool>& stop) {
    std::optional<std::vector<bool>> pointing;
    s.dwarf_indexes().load_all(stop, [&](std::size_t module) {
      if (!pointing) pointing = s.modules_pointing_to_blocks_if_ready();
      return !pointing || (*pointing)[module];
    });
    if (!stop) s.frames();
  });
  // Every reachable block's name (the suspects group by type; no row or suspect is a leak) needs no graph,
  // and the graph and its dominator tree need no names: one thread each, the progress shown being the
  // names' (the longer: a pointer chase through the heap in DWARF's order, where the scan and the tree's
  // passes share the other core). No leak verdict is asked for: the tree is its own reachability pass.
  s.compute_side_by_side([&] { s.reachable_names(); }, [&] {
    s.graph();
    s.retention();
  });
  const BlockNames& names = s.reachable_names();
  const Retention& r = s.retention();
  PhaseTimer timer("top");
  TopReport out;
  out.by = top_by_name(by);
  out.heap = heap_totals(r);
  switch (by) {
    case TopBy::block: out.blocks = top_blocks(s, names, r, count); break;
    case TopBy::type: out.types = top_types(s, names, r, count); break;
    case TopBy::site: out.types = top_sites(s, r, count); break;
    case TopBy::root: out.roots = top_roots(s, r, count); break;
  }
  out.suspects = SuspectFinder(s, names, r).find();
  return out;
}

RootsReport build_roots_report(Session& s, std::size_t count) {
  const Retention& r = s.retention();
  PhaseTimer timer("roots report");
  RootsReport out;
  out.heap = heap_totals(r);
  Retained by_kinds;
  for (std::size_t k = 0; k < kOwnerKinds; ++k) {
    const auto kind = static_cast<OwnerKind>(k);
    const std::uint32_t node = r.owner_kind_node(kind);
    if (node == kNoNode) continue;
    RootKindRow row{owner_kind_name(kind), 0, retained_of(r, node), {}, {}};
    Retained alone;  // Σ over the kind's owners of what each keeps alive alone
    for (std::uint32_t i = 0; i < r.root_nodes().size(); ++i) {
      const RootNode& n = r.root_nodes()[i];
      if (n.level != RootNode::Level::owner || n.owner_kind != kind) continue;
      ++row.roots;
      const Retained own = retained_of(r, r.root_node_id(i));
      alone.bytes += own.bytes;
      alone.blocks += own.blocks;
    }
    row.together = retained_total(r, row.retained.bytes - std::min(alone.bytes, row.retained.bytes),
                                  row.retained.blocks - std::min(alone.blocks, row.retained.blocks));
    if (kind == OwnerKind::thread) row.parts = thread_part_totals(r);
    by_kinds.bytes += row.retained.bytes;
    by_kinds.blocks += row.retained.blocks;
    out.kinds.push_back(std::move(row));
  }
  std::stable_sort(out.kinds.begin(), out.kinds.end(),
                   [](const RootKindRow& a, const RootKindRow& b) { return a.retained.bytes > b.retained.bytes; });
  out.shared = retained_total(r, out.heap.reachable_bytes - by_kinds.bytes, out.heap.reachable_blocks - by_kinds.blocks);
  out.roots = top_roots(s, r, count);
  out.root_count = 0;
  for (const RootNode& n : r.root_nodes()) out.root_count += n.level == RootNode::Level::owner;
  return out;
}

}  // namespace heapscope
