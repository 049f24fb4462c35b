// One walk down the dominator tree, on all cores, for what `top`'s suspects ask of every reachable block:
// the big retainer it lies under, and where it piles up (its nearest dominator that is no block of its
// type: a list's nodes pile up under what holds the list's head), with how many blocks pile up under each
// node.
//
// A node's answers come from its dominators', so each worker takes a slice of the blocks, climbs from each
// block up to the nearest dominator whose answer is known, and hands that answer down the nodes it passed:
// every node is climbed through once, unless two workers meet on one path. Both then store the one value
// the tree gives each node, so the race is harmless (relaxed atomics make it defined), and the result is
// the same on any number of workers.
#pragma once

#include <atomic>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "base/progress.h"
#include "base/workers.h"
#include "model/retention.h"

namespace heapscope {

struct DominatorWalk {
  // A byte a node: `top`'s owners are its big retainers, each retaining a tenth of the heap or more and none
  // inside another, so there are ten at most (a byte less a node than 16 bits: 100 MB at 100M blocks).
  using OwnerIndex = std::uint8_t;
  static constexpr OwnerIndex kNoOwner = 0xff;
  static constexpr OwnerIndex kMaxOwners = 0xfe;  // owners past these count as none
  static constexpr std::uint8_t kPiledInByte = 0xff;
  // Per node: the index (into the walk's `owners`) of the owner it lies under, itself included; kNoOwner
  // for none. Meaningful for reachable nodes.
  std::vector<OwnerIndex> owner;
  // Per reachable block: its nearest dominator that is not a block of its type.
  std::vector<std::uint32_t> piles_under;
  // Per node: the reachable blocks piling up under it, in a byte up to kPiledInByte, and past that in
  // `piled_past`: each such node has that many blocks of its own, so they are few (a byte a node less
  // than 16-bit counts, and counts without a ceiling).
  std::vector<std::uint8_t> piled;
  std::unordered_map<std::uint32_t, std::uint64_t> piled_past;  // node → its count less kPiledInByte

  std::uint64_t piled_count(std::uint32_t node) const {
    if (piled[node] < kPiledInByte) return piled[node];
    const auto it = piled_past.find(node);
    return kPiledInByte + (it == piled_past.end() ? 0 : it->second);
  }
};

namespace dominator_walk_detail {

inline constexpr DominatorWalk::OwnerIndex kUnsetOwner = DominatorWalk::kMaxOwners;
inline constexpr std::uint32_t kUnsetNode = 0xfffffffeu;  // node ids are below 2^31

template <typename T>
T load(T& slot) {
  return std::atomic_ref<T>(slot).load(std::memory_order_relaxed);
}
template <typename T>
void store(T& slot, T value) {
  std::atomic_ref<T>(slot).store(value, std::memory_order_relaxed);
}

// The owner of `node`: that of its nearest dominator (itself included) whose owner is set.
inline void settle_owner(const Retention& r, std::vector<DominatorWalk::OwnerIndex>& owner, std::uint32_t node,
                         std::vector<std::uint32_t>& path) {
  path.clear();
  DominatorWalk::OwnerIndex found;
  for (std::uint32_t at = node; (found = load(owner[at])) == kUnsetOwner; at = r.dominator(at)) path.push_back(at);
  for (const std::uint32_t v : path) store(owner[v], found);
}

// Where block `b` piles up: a run of one type's blocks, each dominating the next, piles up where the run's
// first block's dominator is.
template <typename Same>
std::uint32_t settle_pile(const Retention& r, const Same& same, std::vector<std::uint32_t>& under, BlockId b,
                          std::vector<std::uint32_t>& path) {
  path.clear();
  std::uint32_t found;
  for (std::uint32_t at = b;;) {
    if ((found = load(under[at])) != kUnsetNode) break;
    path.push_back(at);
    const std::uint32_t up = r.dominator(at);
    if (!r.is_block(up) || !same(up, at)) {
      found = up;
      break;
    }
    at = up;
  }
  for (const std::uint32_t v : path) store(under[v], found);
  return found;
}

// One more block piled under a node: in the node's byte while that has room (false once it has none).
inline bool count_in_byte(std::uint8_t& piled) {
  std::atomic_ref<std::uint8_t> counter(piled);
  for (std::uint8_t seen = counter.load(std::memory_order_relaxed); seen != DominatorWalk::kPiledInByte;)
    if (counter.compare_exchange_weak(seen, static_cast<std::uint8_t>(seen + 1), std::memory_order_relaxed)) return true;
  return false;
}

// A worker's counts past the byte. Neighbouring blocks mostly pile under one node (a list's nodes, allocated
// together), so the node counted last is kept apart and goes into the map only when another comes: a map
// update per block cost seconds at 100M blocks.
class PastCounts {
 public:
  void add(std::uint32_t node) {
    if (node != node_) {
      flush();
      node_ = node;
    }
    ++pending_;
  }
  std::unordered_map<std::uint32_t, std::uint64_t>& flushed() {
    flush();
    return counts_;
  }

 private:
  void flush() {
    if (pending_) counts_[node_] += pending_;
    pending_ = 0;
  }
  std::uint32_t node_ = kUnsetNode;
  std::uint64_t pending_ = 0;
  std::unordered_map<std::uint32_t, std::uint64_t> counts_;
};

}  // namespace dominator_walk_detail

// `owners`: nodes none of which dominates another (the first kMaxOwners count); `same(a, b)`: whether the
// reachable blocks a and b are of one type (an equivalence). `workers`: how many (0: one per core on a
// large heap, one on a small one).
template <typename Same>
DominatorWalk walk_dominators(const Retention& r, std::span<const std::uint32_t> owners, const Same& same,
                              unsigned workers = 0) {
  using namespace dominator_walk_detail;
  DominatorWalk walk{std::vector<DominatorWalk::OwnerIndex>(r.node_count(), kUnsetOwner),
                     std::vector<std::uint32_t>(r.block_count(), kUnsetNode),
                     std::vector<std::uint8_t>(r.node_count(), 0), {}};
  walk.owner[r.super_root()] = DominatorWalk::kNoOwner;
  for (std::size_t i = 0; i < owners.size() && i < DominatorWalk::kMaxOwners; ++i)
    walk.owner[owners[i]] = static_cast<DominatorWalk::OwnerIndex>(i);
  const unsigned n = workers ? workers : worker_count(r.block_count(), kBlocksPerWorker);
  std::vector<PastCounts> past(n);
  run_workers(n, [&](unsigned w) {
    std::vector<std::uint32_t> path;
    const auto [first, last] = slice_of(r.block_count(), n, w);
    for (std::size_t i = first; i < last; ++i) {
      if ((i & kCheckMask) == 0) progress_check();
      const auto b = static_cast<BlockId>(i);
      if (!r.reachable(b)) continue;
      settle_owner(r, walk.owner, b, path);
      const std::uint32_t under = settle_pile(r, same, walk.piles_under, b, path);
      if (!count_in_byte(walk.piled[under])) past[w].add(under);
    }
  });
  for (PastCounts& worker_past : past)
    for (const auto& [node, count] : worker_past.flushed()) walk.piled_past[node] += count;
  return walk;
}

}  // namespace heapscope
