// The flood on all cores against the serial flood of reference_graph.h, on random graphs and on the shape
// that gives the workers nothing to share (one long list), and its stop on Ctrl-C.
#include <catch2/catch.hpp>

#include <atomic>
#include <random>

#include "model/parallel_flood.h"

using namespace heapscope;

namespace {

// A graph as edge lists per block; an edge may carry the interior bit.
struct Graph {
  std::vector<std::vector<std::uint32_t>> out;
  std::span<const std::uint32_t> edges(BlockId b) const { return out[b]; }
};

Graph random_graph(std::mt19937& rng, std::size_t blocks, std::size_t edges) {
  Graph g;
  g.out.resize(blocks);
  std::uniform_int_distribution<std::uint32_t> pick(0, static_cast<std::uint32_t>(blocks - 1));
  for (std::size_t i = 0; i < edges; ++i) {
    const std::uint32_t interior = rng() % 4 == 0 ? kInteriorBit : 0;
    g.out[pick(rng)].push_back(pick(rng) | interior);
  }
  return g;
}

// The roots marked (each once) in `marks`, and the list a flood starts from.
std::vector<BlockId> mark_roots(const std::vector<BlockId>& roots, std::vector<std::uint8_t>& marks) {
  std::vector<BlockId> pending;
  for (const BlockId r : roots) add_flood_start(pending, marks, r, 1);
  return pending;
}

// What the serial flood marks from `roots` along the edges `admit` takes.
template <class Admit>
std::vector<std::uint8_t> serial_marks(const Graph& g, const std::vector<BlockId>& roots, Admit admit) {
  std::vector<std::uint8_t> marks(g.out.size(), 0);
  std::vector<BlockId> pending = mark_roots(roots, marks);
  flood(pending, marks, [&](BlockId b) { return g.edges(b); }, admit);
  return marks;
}

std::vector<std::uint8_t> parallel_marks(const Graph& g, const std::vector<BlockId>& roots, bool start_edges_only,
                                         unsigned workers, std::vector<std::vector<BlockId>>* skipped = nullptr) {
  std::vector<std::uint8_t> marks(g.out.size(), 0);
  std::vector<BlockId> pending = mark_roots(roots, marks);
  if (skipped) skipped->assign(workers, {});
  parallel_flood(std::move(pending), marks, 1, workers, [&](BlockId b) { return g.edges(b); },
                 [&](std::uint32_t e, unsigned w) {
                   if (!start_edges_only || !edge_is_interior(e)) return true;
                   if (skipped) (*skipped)[w].push_back(edge_target(e));
                   return false;
                 });
  return marks;
}

}  // namespace

TEST_CASE("parallel flood: marks what the serial flood marks, on 1 to 4 workers") {
  std::mt19937 rng(7);
  for (int round = 0; round < 30; ++round) {
    const std::size_t blocks = 1 + rng() % 5000;
    const Graph g = random_graph(rng, blocks, rng() % (3 * blocks));
    std::vector<BlockId> roots;
    for (std::size_t i = rng() % 20; i > 0; --i) roots.push_back(static_cast<BlockId>(rng() % blocks));
    const auto all = serial_marks(g, roots, [](std::uint32_t) { return true; });
    const auto firm = serial_marks(g, roots, [](std::uint32_t e) { return !edge_is_interior(e); });
    for (unsigned workers = 1; workers <= 4; ++workers) {
      INFO("round " << round << ", " << blocks << " blocks, " << workers << " workers");
      CHECK(parallel_marks(g, roots, false, workers) == all);
      std::vector<std::vector<BlockId>> skipped;
      CHECK(parallel_marks(g, roots, true, workers, &skipped) == firm);
      // Every interior edge out of the firm set to a block outside it was handed to `admit`.
      std::vector<bool> told(blocks, false);
      for (const auto& per_worker : skipped)
        for (const BlockId b : per_worker) told[b] = true;
      for (BlockId b = 0; b < blocks; ++b)
        if (firm[b])
          for (const std::uint32_t e : g.out[b])
            if (edge_is_interior(e) && !firm[edge_target(e)]) CHECK(told[edge_target(e)]);
    }
  }
}

TEST_CASE("parallel flood: one long list, and many roots with nothing below them") {
  Graph list;
  constexpr std::size_t kLength = 200000;
  list.out.resize(kLength);
  for (std::uint32_t b = 0; b + 1 < kLength; ++b) list.out[b].push_back(b + 1);
  for (unsigned workers : {1u, 2u, 3u}) {
    const auto marks = parallel_marks(list, {0}, false, workers);
    CHECK(std::count(marks.begin(), marks.end(), 1) == static_cast<long>(kLength));
  }
  Graph flat;
  flat.out.resize(kLength);
  std::vector<BlockId> roots;
  for (BlockId b = 0; b < kLength; b += 2) roots.push_back(b);
  const auto marks = parallel_marks(flat, roots, false, 3);
  CHECK(std::count(marks.begin(), marks.end(), 1) == static_cast<long>(kLength / 2));
  CHECK(parallel_marks(flat, {}, false, 2) == std::vector<std::uint8_t>(kLength, 0));
}

TEST_CASE("parallel flood: Ctrl-C stops every worker, and the stop is thrown") {
  Progress progress;
  std::atomic<bool> stop{false};
  progress.set_interrupt_check([&] { return stop.load(); });
  progress.begin();
  ProgressScope current(&progress);
  PhaseScope phase(progress, "reachability");
  stop = true;
  CHECK_THROWS_AS(progress.check(/*at_once=*/true), Interrupted);  // noticed: every later step throws
  std::mt19937 rng(11);
  const Graph g = random_graph(rng, 1 << 20, 3 << 20);
  std::vector<BlockId> roots;
  for (BlockId b = 0; b < 64; ++b) roots.push_back(b);
  CHECK_THROWS_AS(parallel_marks(g, roots, false, 2), Interrupted);
  progress.end();
}
