// Walks down the dominator tree, on all cores, for what `top`'s suspects ask of every reachable block: the
// big retainer it lies under (owners_of_nodes), and where it piles up (Piles): its nearest dominator
// that is no block of its type (a list's nodes pile up under what holds the list's head), with how many
// blocks pile up under each node. Two walks, each with its own arrays, so that one's are gone before the
// other's are made: `top`'s peak memory is here.
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

#include "base/bit_array.h"
#include "base/progress.h"
#include "base/workers.h"
#include "model/retention.h"

namespace heapscope {

// A byte a node: `top`'s owners are its big retainers, each retaining a tenth of the heap or more and none
// inside another, so there are ten at most (a byte less a node than 16 bits: 100 MB at 100M blocks).
using OwnerIndex = std::uint8_t;
inline constexpr OwnerIndex kNoOwner = 0xff;
inline constexpr OwnerIndex kMaxOwners = 0xfe;  // owners past these count as none

namespace dominator_walk_detail {

inline constexpr OwnerIndex kUnsetOwner = kMaxOwners;
inline constexpr std::uint32_t kUnsetNode = 0xfffffffeu;  // node ids are below 2^31
inline constexpr std::uint8_t kPiledInByte = 0xff;

template <typename T>
T load(T& slot) {
  return std::atomic_ref<T>(slot).load(std::memory_order_relaxed);
}
template <typename T>
void store(T& slot, T value) {
  std::atomic_ref<T>(slot).store(value, std::memory_order_relaxed);
}

// The owner of `node`: that of its nearest dominator (itself included) whose owner is set.
inline void settle_owner(const Retention& r, std::vector<OwnerIndex>& owner, std::uint32_t node,
                         std::vector<std::uint32_t>& path) {
  path.clear();
  OwnerIndex found;
  for (std::uint32_t at = node; (found = load(owner[at])) == kUnsetOwner; at = r.dominator(at)) path.push_back(at);
  for (const std::uint32_t v : path) store(owner[v], found);
}

// One more block piled under a node: in the node's byte while that has room (false once it has none).
inline bool count_in_byte(std::uint8_t& piled) {
  std::atomic_ref<std::uint8_t> counter(piled);
  for (std::uint8_t seen = counter.load(std::memory_order_relaxed); seen != kPiledInByte;)
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

// Per node: the index (into `owners`) of the owner it lies under, itself included; kNoOwner for none.
// Meaningful for reachable nodes. `owners`: nodes none of which dominates another (the first kMaxOwners
// count). `workers`: how many (0: one per core on a large heap, one on a small one). `each(worker, b,
// owner)` is called for every reachable block once its owner is known, by the worker whose slice of the
// blocks holds it, in block order within the slice: what is tallied per block then needs no pass of its own.
template <typename Each>
std::vector<OwnerIndex> owners_of_nodes(const Retention& r, std::span<const std::uint32_t> owners, unsigned workers,
                                        const Each& each) {
  using namespace dominator_walk_detail;
  std::vector<OwnerIndex> owner(r.node_count(), kUnsetOwner);
  owner[r.super_root()] = kNoOwner;
  for (std::size_t i = 0; i < owners.size() && i < kMaxOwners; ++i) owner[owners[i]] = static_cast<OwnerIndex>(i);
  const unsigned n = workers ? workers : worker_count(r.block_count(), kBlocksPerWorker);
  run_workers(n, [&](unsigned w) {
    std::vector<std::uint32_t> path;
    const auto [first, last] = slice_of(r.block_count(), n, w);
    for (std::size_t b = first; b < last; ++b) {
      if ((b & kCheckMask) == 0) progress_check();
      const auto block = static_cast<BlockId>(b);
      if (!r.reachable(block)) continue;
      settle_owner(r, owner, block, path);
      each(w, block, load(owner[b]));
    }
  });
  return owner;
}

// Where each reachable block piles up: a run of one type's blocks, each dominating the next, piles up where
// the run's first block's dominator is. Most blocks' dominator is no block of their type, and there they
// pile up: only the others, the blocks that continue a run (a third of the mixed heap's and of swipl's),
// keep an answer, 4 bytes each by their rank among them; the rest is a bit a block.
class Piles {
 public:
  // `same(a, b)`: whether the reachable blocks a and b are of one type (an equivalence).
  template <typename Same>
  Piles(const Retention& r, const Same& same, unsigned workers = 0);

  // The node the reachable block `b` piles up under.
  std::uint32_t under(BlockId b) const { return continues_.contains(b) ? run_pile_[continues_.rank(b)] : r_.dominator(b); }
  // How many reachable blocks pile up under `node`.
  std::uint64_t count(std::uint32_t node) const {
    if (piled_[node] < dominator_walk_detail::kPiledInByte) return piled_[node];
    const auto it = piled_past_.find(node);
    return dominator_walk_detail::kPiledInByte + (it == piled_past_.end() ? 0 : it->second);
  }

 private:
  // Where the run `b` continues piles up: climbs the run to its first block, handing the answer down.
  std::uint32_t settle_run(BlockId b, std::vector<std::size_t>& path);

  const Retention& r_;
  RankedBits continues_;                 // the reachable blocks whose dominator is a block of their type
  std::vector<std::uint32_t> run_pile_;  // per continuing block, by rank: where it piles up
  // Per node: the reachable blocks piling up under it, in a byte up to kPiledInByte, and past that in
  // `piled_past_`: each such node has that many blocks of its own, so they are few.
  std::vector<std::uint8_t> piled_;
  std::unordered_map<std::uint32_t, std::uint64_t> piled_past_;  // node → its count less kPiledInByte
};

template <typename Same>
Piles::Piles(const Retention& r, const Same& same, unsigned workers) : r_(r) {
  using namespace dominator_walk_detail;
  const unsigned n = workers ? workers : worker_count(r.block_count(), kBlocksPerWorker);
  BitArray continues(r.block_count());
  run_workers(n, [&](unsigned w) {  // whole words each
    const auto [first, last] = slice_of(continues.word_count(), n, w);
    for (std::size_t b = 64 * first; b < std::min<std::size_t>(64 * last, r.block_count()); ++b) {
      if ((b & kCheckMask) == 0) progress_check();
      const auto block = static_cast<BlockId>(b);
      if (!r.reachable(block)) continue;
      const std::uint32_t up = r.dominator(block);
      if (r.is_block(up) && same(up, block)) continues.set(b);
    }
  });
  continues_ = RankedBits(std::move(continues));
  run_pile_.assign(continues_.members(), kUnsetNode);
  piled_.assign(r.node_count(), 0);
  std::vector<PastCounts> past(n);
  run_workers(n, [&](unsigned w) {
    std::vector<std::size_t> path;
    const auto [first, last] = slice_of(r.block_count(), n, w);
    for (std::size_t i = first; i < last; ++i) {
      if ((i & kCheckMask) == 0) progress_check();
      const auto b = static_cast<BlockId>(i);
      if (!r.reachable(b)) continue;
      const std::uint32_t pile = continues_.contains(b) ? settle_run(b, path) : r.dominator(b);
      if (!count_in_byte(piled_[pile])) past[w].add(pile);
    }
  });
  for (PastCounts& worker_past : past)
    for (const auto& [node, count] : worker_past.flushed()) piled_past_[node] += count;
}

inline std::uint32_t Piles::settle_run(BlockId b, std::vector<std::size_t>& path) {
  using namespace dominator_walk_detail;
  path.clear();
  std::uint32_t found;
  for (BlockId at = b;;) {  // `at` continues the run: its dominator is the run's block before it
    const std::size_t slot = continues_.rank(at);
    if ((found = load(run_pile_[slot])) != kUnsetNode) break;
    path.push_back(slot);
    const BlockId up = r_.dominator(at);
    if (!continues_.contains(up)) {
      found = r_.dominator(up);  // `up` begins the run
      break;
    }
    at = up;
  }
  for (const std::size_t slot : path) store(run_pile_[slot], found);
  return found;
}

}  // namespace heapscope
