// The flood of reference_graph.h on all cores, for the traversals that visit most of a large heap
// (reachability). The workers share one mark per block, set once by whichever gets there first, and each
// follows its own stack depth first; a worker whose stack runs dry takes work from a shared pool, which
// the others fill from the bottom of their stacks (the entries nearest the roots, with the most below
// them) when they see it hungry. A heap that is one long list gives no worker anything to share: it is
// then walked by one, as the serial flood would.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <type_traits>
#include <vector>

#include "base/progress.h"
#include "base/workers.h"
#include "model/reference_graph.h"

namespace heapscope {

namespace parallel_flood_detail {

// Work handed between workers, and when to stop: every worker waiting with nothing, or one of them failed.
class Pool {
 public:
  Pool(std::vector<BlockId> items, unsigned workers) : items_(std::move(items)), workers_(workers) {
    hungry_ = items_.empty();
  }

  // Refills `stack` (empty) from the pool, waiting while others still work; false when the flood is over.
  bool take(std::vector<BlockId>& stack) {
    std::unique_lock lock(mutex_);
    ++idle_;
    hungry_.store(true, std::memory_order_relaxed);
    ready_.wait(lock, [&] { return !items_.empty() || stopped() || idle_ == workers_; });
    if (items_.empty() || stopped()) {
      stop_.store(true, std::memory_order_relaxed);
      ready_.notify_all();
      return false;
    }
    --idle_;
    // A share of what waits, so that a pool of many roots spreads over every worker.
    const std::size_t n = std::clamp<std::size_t>(items_.size() / workers_, 1, kMostTaken);
    stack.assign(items_.end() - static_cast<std::ptrdiff_t>(n), items_.end());
    items_.resize(items_.size() - n);
    hungry_.store(items_.empty() && idle_ > 0, std::memory_order_relaxed);
    return true;
  }

  // Gives the bottom half of `stack` to the pool when some worker waits for work.
  void share(std::vector<BlockId>& stack) {
    if (!hungry_.load(std::memory_order_relaxed) || stack.size() < 2) return;
    std::lock_guard lock(mutex_);
    const std::size_t half = stack.size() / 2;
    items_.insert(items_.end(), stack.begin(), stack.begin() + static_cast<std::ptrdiff_t>(half));
    stack.erase(stack.begin(), stack.begin() + static_cast<std::ptrdiff_t>(half));
    hungry_.store(false, std::memory_order_relaxed);
    ready_.notify_all();
  }

  // A worker failed (Ctrl-C): the others stop at their next look.
  void fail() {
    std::lock_guard lock(mutex_);
    stop_.store(true, std::memory_order_relaxed);
    ready_.notify_all();
  }
  bool stopped() const { return stop_.load(std::memory_order_relaxed); }

 private:
  static constexpr std::size_t kMostTaken = 1024;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::vector<BlockId> items_;
  unsigned workers_;
  unsigned idle_ = 0;
  std::atomic<bool> hungry_{false};
  std::atomic<bool> stop_{false};
};

}  // namespace parallel_flood_detail

// Adds block `b` to a flood's starts (`pending`), marked `mark`, unless it is marked already: the floods
// below and in reference_graph.h take their starts marked.
inline void add_flood_start(std::vector<BlockId>& pending, std::vector<std::uint8_t>& marks, BlockId b,
                            std::uint8_t mark) {
  if (marks[b]) return;
  marks[b] = mark;
  pending.push_back(b);
}

// From the blocks on `pending` (marked by the caller), marks with `mark` and follows every edge of
// `next(block)` that `admit(edge, worker)` (or `admit(edge, worker, from)`) accepts and that leads to a
// block whose mark is still 0; a block is visited by one worker, once. `admit` is called from the workers
// at once: what it records, it records per worker. Each block visited is a step of the current progress (Ctrl-C stops every worker).
template <class Next, class Admit>
void parallel_flood(std::vector<BlockId> pending, std::vector<std::uint8_t>& marks, std::uint8_t mark,
                    unsigned workers, Next&& next, Admit&& admit) {
  // `admit` may also take the block the edge leaves (edge, worker, from). The edge is a reference into
  // next(from)'s span, for an admit that looks up where it lies (ReferenceGraph::edge_position).
  const auto admits = [&](const std::uint32_t& e, unsigned w, BlockId from) {
    if constexpr (std::is_invocable_v<Admit, std::uint32_t, unsigned, BlockId>) return admit(e, w, from);
    else return admit(e, w);
  };
  parallel_flood_detail::Pool pool(std::move(pending), workers);
  run_workers(workers, [&](unsigned w) {
    constexpr std::uint32_t kProgressBlocks = 1 << 16, kShareEvery = 64;
    std::vector<BlockId> stack;
    std::uint32_t visited = 0;
    try {
      while (!pool.stopped() && pool.take(stack)) {
        while (!stack.empty()) {
          const BlockId b = stack.back();
          stack.pop_back();
          for (const std::uint32_t& e : next(b)) {
            const BlockId to = edge_target(e);
            std::atomic_ref<std::uint8_t> to_mark(marks[to]);
            if (to_mark.load(std::memory_order_relaxed) != 0 || !admits(e, w, b)) continue;
            std::uint8_t unmarked = 0;
            if (to_mark.compare_exchange_strong(unmarked, mark, std::memory_order_relaxed)) stack.push_back(to);
          }
          if (++visited % kShareEvery == 0) {
            if (pool.stopped()) return;
            pool.share(stack);
            if (visited == kProgressBlocks) {
              progress_step(visited);
              visited = 0;
            }
          }
        }
      }
      progress_step(visited);
    } catch (...) {
      pool.fail();
      throw;
    }
  });
}

}  // namespace heapscope
