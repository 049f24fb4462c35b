// Running one job on all cores: the pool shape the walk, the scan and the shape search share.
#pragma once

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <thread>
#include <vector>

#include "base/progress.h"

namespace heapscope {

// How many workers to use for `items` units of work, one worker per `per_worker` units at least, and at
// most `requested` (0: one per core).
inline unsigned worker_count(std::size_t items, std::size_t per_worker, unsigned requested = 0) {
  const unsigned cores = requested ? requested : std::max(1u, std::thread::hardware_concurrency());
  return static_cast<unsigned>(std::max<std::size_t>(1, std::min<std::size_t>(cores, (items + per_worker - 1) / per_worker)));
}

// The least share of a pass over every block worth a worker of its own: a thread costs tens of
// microseconds to start, a quarter of a million blocks a millisecond or more to pass over.
inline constexpr std::size_t kBlocksPerWorker = std::size_t{1} << 18;

// Worker w's part of `items` split among n workers: [first, last), contiguous, in order, within one of
// each other in size.
struct Slice {
  std::size_t first = 0, last = 0;
};
inline Slice slice_of(std::size_t items, unsigned n, unsigned w) { return {items * w / n, items * (w + 1) / n}; }

// Calls fn(w) for each w in [0, n) on its own thread (worker 0 on the calling one), each with the caller's
// Progress installed; once all have stopped, rethrows the first exception one threw (Ctrl-C included).
template <class Fn>
void run_workers(unsigned n, Fn&& fn) {
  ThreadErrors errors;
  std::vector<std::thread> threads;
  for (unsigned w = 1; w < n; ++w) threads.emplace_back([&, w] { errors.run([&] { fn(w); }); });
  errors.run([&] { fn(0u); });
  for (auto& t : threads) t.join();
  errors.rethrow();
}

// Whether holds(first, last) is true of every slice [first, last) of [0, items), each tested on a core of
// its own (each worker a slice of at least `per_worker` items): a saved index's checks of whole arrays.
template <class Holds>
bool holds_in_all_slices(std::size_t items, std::size_t per_worker, Holds&& holds) {
  const unsigned n = worker_count(items, per_worker);
  std::vector<char> held(n);
  run_workers(n, [&](unsigned w) {
    const auto [first, last] = slice_of(items, n, w);
    held[w] = holds(first, last);
  });
  return std::all_of(held.begin(), held.end(), [](char h) { return h != 0; });
}

// What `find(first, last, out)` appends to `out` for the slices [first, last) of [0, items), found on all
// cores (each worker a slice of at least `per_worker` items) and returned in the order one pass would give:
// the few items of a pass over every block that something is done with afterwards, in order.
template <class T, class FindInSlice>
std::vector<T> collect_from_slices(std::size_t items, std::size_t per_worker, FindInSlice&& find) {
  const unsigned n = worker_count(items, per_worker);
  std::vector<std::vector<T>> found(n);
  run_workers(n, [&](unsigned w) {
    const auto [first, last] = slice_of(items, n, w);
    find(first, last, found[w]);
  });
  std::vector<T> out = std::move(found[0]);
  for (unsigned w = 1; w < n; ++w) std::move(found[w].begin(), found[w].end(), std::back_inserter(out));
  return out;
}

// The same, one item at a time: what `find(i, out)` appends for each i, with a check for Ctrl-C now and then.
template <class T, class Find>
std::vector<T> collect_in_slices(std::size_t items, std::size_t per_worker, Find&& find) {
  return collect_from_slices<T>(items, per_worker, [&](std::size_t first, std::size_t last, std::vector<T>& out) {
    for (std::size_t i = first; i < last; ++i) {
      if ((i & kCheckMask) == 0) progress_check();
      find(i, out);
    }
  });
}

}  // namespace heapscope
