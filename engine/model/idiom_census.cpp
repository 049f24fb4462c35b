#include "model/idiom_census.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <unordered_map>

#include "base/phase_timer.h"
#include "base/progress.h"
#include "base/workers.h"

namespace heapscope {

namespace {

// Where a pointer sits: a block edge's position, or a root edge's with kRootBit.
constexpr std::uint64_t kRootBit = std::uint64_t{1} << 63;
// A fixed-offset group's key holds the usable size and the offset in these many bits.
constexpr unsigned kOffsetBits = 24, kSizeBits = 38;

enum class GroupKind : std::uint64_t { length_prefixed = 1, fixed_offset = 2, pool = 3 };
GroupKind kind_of(std::uint64_t key) { return static_cast<GroupKind>(key >> 62); }
std::uint64_t group_key(GroupKind kind, std::uint64_t value) { return static_cast<std::uint64_t>(kind) << 62 | value; }

struct Waiting {
  std::uint64_t at;
  BlockId target;
  std::uint32_t offset;  // into the target (length-prefixed pointers' only: at most kMaxPrefixBytes)
};

// The pointers of one shape: their distinct members (blocks; for a pool, offsets) up to the quorum, and
// those not yet explained.
struct Group {
  HeldBy held = 0;
  bool approved = false;  // the quorum is met, for good
  std::uint8_t members = 0;
  std::array<std::uint64_t, kPopulationQuorum> seen{};
  std::vector<Waiting> waiting;

  void meet(std::uint64_t member) {
    if (members == kPopulationQuorum) return;
    for (std::uint8_t i = 0; i < members; ++i)
      if (seen[i] == member) return;
    seen[members++] = member;
  }
  bool quorum() const { return members == kPopulationQuorum; }
  bool population() const { return approved || quorum(); }
  // Takes in what another worker found of the same group.
  void merge(Group&& other) {
    approved = approved || other.approved;
    for (std::uint8_t i = 0; i < other.members; ++i) meet(other.seen[i]);
    waiting.insert(waiting.end(), other.waiting.begin(), other.waiting.end());
  }
};

// Where explained pointers are marked: a bit per edge (set from several workers), the idiom per block.
struct Marks {
  BitArray& edges;
  BitArray& roots;  // set from one thread at a time
  std::vector<HeldBy>& idioms;

  void explain(std::uint64_t at, BlockId target, HeldBy held) {
    if (at & kRootBit) {
      roots.set(at & ~kRootBit);
    } else {
      std::atomic_ref<std::uint64_t>(edges.word(at / 64)).fetch_or(std::uint64_t{1} << (at % 64), std::memory_order_relaxed);
    }
    std::atomic_ref<HeldBy> idiom(idioms[target]);
    if (idiom.load(std::memory_order_relaxed) == 0) idiom.store(held, std::memory_order_relaxed);
  }
};

// One worker's share of the census.
class Census {
 public:
  Census(const ReferenceGraph& g, const IdiomCheck& check, IdiomSet idioms, Marks& marks)
      : g_(g), check_(check), idioms_(idioms), marks_(marks) {}

  // The interior pointer `word` into block `t`, at `at`.
  void look(std::uint64_t at, std::uint64_t word, BlockId t) {
    const Block& block = g_.index().blocks()[t];
    const std::uint64_t offset = word - block.address();
    const Idiom idiom = check_.classify(block, word);
    if (idiom == Idiom::length_prefixed)
      return join(GroupKind::length_prefixed, offset, held_by(idiom, offset), t, {at, t, static_cast<std::uint32_t>(offset)});
    if (idiom != Idiom::none) return marks_.explain(at, t, held_by(idiom, offset));
    join_shapes(at, t, offset);
  }

  // A pointer `offset` bytes into block `t` no test of its bytes explains: the groups of its shape.
  void join_shapes(std::uint64_t at, BlockId t, std::uint64_t offset) {
    const std::uint64_t usable = g_.index().blocks()[t].usable_size();
    if (on(Idiom::fixed_offset) && offset < (std::uint64_t{1} << kOffsetBits) && usable < (std::uint64_t{1} << kSizeBits))
      join(GroupKind::fixed_offset, usable << kOffsetBits | offset, held_by(Idiom::fixed_offset, offset), t, {at, t, 0});
    if (on(Idiom::pool) && usable >= kLeastPoolBytes && offset % 8 == 0)
      join(GroupKind::pool, t, held_by(Idiom::pool, 0), offset, {at, t, 0});
  }

  std::unordered_map<std::uint64_t, Group>& groups() { return groups_; }

 private:
  bool on(Idiom i) const { return (idioms_ & idiom_bit(i)) != 0; }

  void join(GroupKind kind, std::uint64_t value, HeldBy held, std::uint64_t member, Waiting pointer) {
    Group& group = group_of(group_key(kind, value));
    if (group.approved) return marks_.explain(pointer.at, pointer.target, group.held);
    if (group.members == 0) group.held = held;
    group.meet(member);
    if (group.quorum()) {
      group.approved = true;
      marks_.explain(pointer.at, pointer.target, held);
      for (const Waiting& w : group.waiting) marks_.explain(w.at, w.target, held);
      group.waiting = {};
      return;
    }
    group.waiting.push_back(pointer);
  }

  // The group of `key`, through a few groups met last: a heap's interior pointers come in runs of one shape
  // (redis' 1.5 million keys, each pointed to a byte or three in), which then cost no map lookup each. The
  // map's elements stay where they are as it grows.
  Group& group_of(std::uint64_t key) {
    for (const auto& [k, group] : recent_)
      if (group && k == key) return *group;
    Group& group = groups_[key];
    recent_[next_recent_] = {key, &group};
    next_recent_ = (next_recent_ + 1) % recent_.size();
    return group;
  }

  const ReferenceGraph& g_;
  const IdiomCheck& check_;
  IdiomSet idioms_;
  Marks& marks_;
  std::unordered_map<std::uint64_t, Group> groups_;
  std::array<std::pair<std::uint64_t, Group*>, 4> recent_{};
  std::size_t next_recent_ = 0;
};

// fn(position, word, target) for each pointer of `edges`' owner (read again by `read_pointers`, which
// finds them in the order the scan made the edges) that makes an interior edge. An owner whose words no
// longer give its edges (an image read differently than the graph was built) is passed over.
template <class ReadPointers, class Fn>
void each_interior_pointer(std::span<const std::uint32_t> edges, std::size_t first, ReadPointers&& read_pointers,
                           Fn&& fn) {
  std::size_t k = 0;
  read_pointers([&](Address, std::uint64_t word, BlockId t) {
    if (k >= edges.size() || edge_target(edges[k]) != t) {
      k = edges.size() + 1;  // out of step: nothing more from this owner
      return;
    }
    if (edge_is_interior(edges[k])) fn(first + k, word, t);
    ++k;
  });
}

}  // namespace

ExplainedPointers::ExplainedPointers(const ReferenceGraph& g, IdiomSet idioms, const std::vector<std::uint8_t>& reached)
    : graph_(&g) {
  if (idioms == kNoIdioms) return;
  PhaseTimer timer("reachability: idioms");
  edges_ = BitArray(g.edge_count());
  roots_ = BitArray(g.root_edge_count());
  idioms_.assign(g.block_count(), 0);
  Marks marks{edges_, roots_, idioms_};
  const IdiomCheck check(g.image(), idioms);

  // Only pointers into blocks no start pointer reached need an idiom, and only they count: a shared_ptr's
  // pointer into the block make_shared made, beside its pointer to the block's start, is neither. Nor is a
  // block's pointer into itself (a std::string's into its own buffer), most of a C++ heap's.
  const auto counts = [&](std::uint32_t e, BlockId owner) {
    return edge_is_interior(e) && edge_target(e) != owner && !reached[edge_target(e)];
  };
  const auto any_counts = [&](std::span<const std::uint32_t> edges, BlockId owner) {
    return std::any_of(edges.begin(), edges.end(), [&](std::uint32_t e) { return counts(e, owner); });
  };
  Census roots(g, check, idioms, marks);
  for (std::size_t r = 0; r < g.root_count(); ++r) {
    const auto edges = g.root_edges(r);
    if (!any_counts(edges, kNoBlock)) continue;
    root_sources_.push_back(r);
    each_interior_pointer(
        edges, g.root_edge_position(edges.front()), [&](auto&& fn) { g.for_each_root_pointer(r, fn); },
        [&](std::size_t at, std::uint64_t word, BlockId t) {
          if (!reached[t]) roots.look(kRootBit | at, word, t);
        });
  }

  const unsigned workers = worker_count(g.block_count(), kBlocksPerWorker);
  std::vector<Census> census(workers, Census(g, check, idioms, marks));
  std::vector<std::vector<BlockId>> sources(workers);
  run_workers(workers, [&](unsigned w) {
    MemoryCursor memory(g.image());
    const auto [first, last] = slice_of(g.block_count(), workers, w);
    for (std::size_t b = first; b < last; ++b) {
      if ((b & kCheckMask) == 0) progress_check();
      const auto edges = g.out_edges(static_cast<BlockId>(b));
      if (!any_counts(edges, static_cast<BlockId>(b))) continue;
      sources[w].push_back(static_cast<BlockId>(b));
      each_interior_pointer(
          edges, g.edge_position(edges.front()),
          [&](auto&& fn) { g.for_each_block_pointer(memory, static_cast<BlockId>(b), fn); },
          [&](std::size_t at, std::uint64_t word, BlockId t) {
            if (t != b && !reached[t]) census[w].look(at, word, t);
          });
    }
  });
  for (const std::vector<BlockId>& part : sources) sources_.insert(sources_.end(), part.begin(), part.end());

  // The groups each worker saw, as one: a group short of its quorum in every worker may meet it in all.
  std::unordered_map<std::uint64_t, Group>& all = roots.groups();
  for (Census& c : census) {
    for (auto& [key, group] : c.groups()) {
      const auto [it, inserted] = all.try_emplace(key, std::move(group));
      if (!inserted) it->second.merge(std::move(group));
    }
    c.groups().clear();
  }
  // Length-prefixed groups first: the pointers of one short of its quorum have their shapes' groups.
  std::vector<Waiting> unexplained;
  for (auto& [key, group] : all) {
    if (kind_of(key) != GroupKind::length_prefixed) continue;
    if (group.population())
      for (const Waiting& w : group.waiting) marks.explain(w.at, w.target, group.held);
    else
      unexplained.insert(unexplained.end(), group.waiting.begin(), group.waiting.end());
    group.waiting = {};
  }
  for (const Waiting& w : unexplained) roots.join_shapes(w.at, w.target, w.offset);
  for (auto& [key, group] : all)
    if (group.population())
      for (const Waiting& w : group.waiting) marks.explain(w.at, w.target, group.held);
  if (std::none_of(idioms_.begin(), idioms_.end(), [](HeldBy h) { return h != 0; })) *this = ExplainedPointers();
}

}  // namespace heapscope
