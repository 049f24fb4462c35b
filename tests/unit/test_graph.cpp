// Block index, reference graph and leak verdicts on a hand-made heap.
#include <catch2/catch.hpp>

#include "model/leak_verdicts.h"
#include "model/reference_graph.h"
#include "symbols/symbol_index.h"
#include "small_heap.h"

using namespace heapscope;

namespace {

struct Fixture : heapscope::testing::SmallHeap {
  using SmallHeap::SmallHeap;
  LeakVerdicts verdicts() {
    const BlockIndex g_index(heap);
    ReferenceGraph g(image, g_index, roots, 2);
    LeakVerdicts v = compute_verdicts(g, heap);
    // The list of leaked blocks is the leaked verdicts, in block order.
    std::vector<BlockId> listed;
    for (BlockId b = 0; b < v.verdict.size(); ++b)
      if (is_leaked(v.verdict[b])) listed.push_back(b);
    REQUIRE(v.leaked == listed);
    return v;
  }
};

}  // namespace

TEST_CASE("block index: user bytes, the next header's prev_size word, and nothing free") {
  Fixture f(4, {BlockState::in_use, BlockState::in_use, BlockState::tcache, BlockState::in_use});
  BlockIndex index(f.heap);
  CHECK(index.find(Fixture::user(0)) == 0);
  CHECK(index.find(Fixture::user(0) + 23) == 0);
  CHECK(index.find(Fixture::user(1) - 16) == 0);  // block 1's prev_size word: block 0's last usable word
  CHECK(index.find(Fixture::user(1) - 8) == kNoBlock);  // block 1's size field belongs to nobody
  CHECK(index.find(Fixture::user(2)) == kNoBlock);  // cached in tcache: free
  CHECK(index.find(Fixture::user(3)) == 3);
  CHECK(index.find(Fixture::kHeap - 8) == kNoBlock);
  CHECK(index.find(0) == kNoBlock);
}

TEST_CASE("block index: a saved page table finds what a built one does, and a damaged one is refused") {
  // 2048 blocks over the 64 KiB segment, one in three free, and a mmapped block after it.
  std::vector<BlockState> states;
  for (int i = 0; i < 2048; ++i) states.push_back(i % 3 == 1 ? BlockState::free : BlockState::in_use);
  Fixture f(2048, states);
  Block mmapped;
  mmapped.chunk = Fixture::kHeap + 0x20000;
  mmapped.size_units = 0x1000 / 16;
  mmapped.state = BlockState::mmapped;
  f.heap.blocks.push_back(mmapped);
  const BlockIndex built(f.heap);
  const std::vector<std::uint32_t> table(built.page_table().begin(), built.page_table().end());
  REQUIRE(table.size() == (0x10000 + 8) / 256 + 1);
  const BlockIndex saved(f.heap, U32Array::viewing(table));
  CHECK(saved.page_table().data() == table.data());  // viewed, not copied
  bool same = true;
  for (Address a = Fixture::kHeap - 64; a < Fixture::kHeap + 0x21000; a += 8) same = same && saved.find(a) == built.find(a);
  CHECK(same);
  CHECK(saved.find(mmapped.address()) == 2048);

  auto damaged = [&](std::size_t at, std::uint32_t value) {
    std::vector<std::uint32_t> t = table;
    t[at] = value;
    return t;
  };
  // Past the span's blocks: refused wherever it is, sampled or not.
  const std::vector<std::uint32_t> past = damaged(7, 2048);
  CHECK_THROWS_AS(BlockIndex(f.heap, U32Array::viewing(past)), std::invalid_argument);
  // Another block of the span, at a sampled page.
  const std::vector<std::uint32_t> wrong = damaged(0, 5);
  CHECK_THROWS_AS(BlockIndex(f.heap, U32Array::viewing(wrong)), std::invalid_argument);
  // Another heap's size.
  const std::vector<std::uint32_t> shorter(table.begin(), table.end() - 1);
  CHECK_THROWS_AS(BlockIndex(f.heap, U32Array::viewing(shorter)), std::invalid_argument);
}

TEST_CASE("verdicts: a lost list is one direct leak and the rest indirect") {
  Fixture f(6);
  f.anchor(0);  // 0 → 1 reachable
  f.link(0, 1);
  f.link(2, 3);  // 2 → 3 → 4 lost
  f.link(3, 4);
  // block 5: nothing points to it
  const LeakVerdicts v = f.verdicts();
  CHECK(v.verdict[0] == Verdict::reachable);
  CHECK(v.verdict[1] == Verdict::reachable);
  CHECK(v.verdict[2] == Verdict::direct_leak);
  CHECK(v.verdict[3] == Verdict::indirect_leak);
  CHECK(v.verdict[4] == Verdict::indirect_leak);
  CHECK(v.verdict[5] == Verdict::direct_leak);
}

TEST_CASE("verdicts: blocks held only in vector registers are reachable, and the registers name them") {
  Fixture f(3);
  f.image.add_thread(42, 0, 0);
  VectorRegisters& vector = f.image.thread_state(0).vector;
  vector.lanes_read = VectorRegisters::kYmmLanes;
  vector.lanes[0][1] = Fixture::user(0);  // the high half of xmm0
  vector.lanes[3][2] = Fixture::user(1);  // the upper half of ymm3
  RootRange registers;
  registers.kind = RootKind::registers;
  registers.thread = 0;
  f.roots.ranges.push_back(registers);
  const std::size_t register_root = f.roots.ranges.size() - 1;

  const LeakVerdicts v = f.verdicts();
  CHECK(v.verdict[0] == Verdict::reachable);
  CHECK(v.verdict[1] == Verdict::reachable);
  CHECK(v.verdict[2] == Verdict::direct_leak);

  const BlockIndex index(f.heap);
  const ReferenceGraph g(f.image, index, f.roots, 1);
  const SymbolIndex symbols(f.image, SymbolSearchOptions{});
  const auto label = [&](BlockId b) {
    const std::vector<Address> sites = g.root_edge_sites(register_root, b);
    REQUIRE(sites.size() == 1);
    return describe_root(f.image, symbols, f.roots.ranges[register_root], sites.front());
  };
  CHECK(label(0) == "register xmm0, thread 1 (tid 42)");
  CHECK(label(1) == "register ymm3, thread 1 (tid 42)");

  // A source that read no vector registers: their stale lanes are not roots.
  vector.lanes_read = 0;
  const LeakVerdicts without = f.verdicts();
  CHECK(without.verdict[0] == Verdict::direct_leak);
  CHECK(without.verdict[1] == Verdict::direct_leak);
}

TEST_CASE("verdicts: a cycle with no entry is a cycle leak, with a direct entry it is indirect") {
  Fixture f(6);
  f.link(0, 1);  // 0 → 1 → 2 → 0: nothing else points in
  f.link(1, 2);
  f.link(2, 0);
  f.link(3, 4);  // 3 → 4 ⇄ 5
  f.link(4, 5);
  f.link(5, 4);
  const LeakVerdicts v = f.verdicts();
  CHECK(v.verdict[0] == Verdict::cycle_leak);
  CHECK(v.verdict[1] == Verdict::cycle_leak);
  CHECK(v.verdict[2] == Verdict::cycle_leak);
  CHECK(v.verdict[3] == Verdict::direct_leak);
  CHECK(v.verdict[4] == Verdict::indirect_leak);
  CHECK(v.verdict[5] == Verdict::indirect_leak);
}

TEST_CASE("verdicts: interior pointers keep blocks alive but mark them possibly leaked") {
  Fixture f(3, {BlockState::in_use, BlockState::in_use, BlockState::free});
  f.anchor(0, 0, 8);  // only a pointer into the middle of block 0
  f.link(0, 1);
  f.anchor(1, 1);     // block 1 also has a pointer to its start
  f.link(1, 2);       // block 2 is free: not a target, never a verdict
  const LeakVerdicts v = f.verdicts();
  CHECK(v.verdict[0] == Verdict::reachable);
  CHECK(v.possibly[0]);
  CHECK(v.verdict[1] == Verdict::reachable);
  CHECK_FALSE(v.possibly[1]);
  CHECK(v.verdict[2] == Verdict::not_allocated);
}

TEST_CASE("reference graph: edges, interior flags and reverse edges") {
  Fixture f(3);
  f.anchor(2);
  f.link(2, 0, 0);
  f.link(2, 1, 1, 4);  // interior pointer to block 1
  const BlockIndex g_index(f.heap);
  ReferenceGraph g(f.image, g_index, f.roots, 1);
  REQUIRE(g.out_edges(2).size() == 2);
  CHECK(edge_target(g.out_edges(2)[0]) == 0);
  CHECK_FALSE(edge_is_interior(g.out_edges(2)[0]));
  CHECK(edge_target(g.out_edges(2)[1]) == 1);
  CHECK(edge_is_interior(g.out_edges(2)[1]));
  REQUIRE(g.in_edges(1).size() == 1);
  CHECK(edge_target(g.in_edges(1)[0]) == 2);
  CHECK(g.in_root_edges(2).size() == 1);
  CHECK(g.in_root_edges(0).empty());
  CHECK(g.edge_count() == 2);
}

TEST_CASE("reference graph: the reverse edges of blocks with hundreds of referrers, in their order") {
  // Block 0 has 300 referrers, block 1 exactly 255 (where a byte's count ends), block 2 has 44; every
  // block's in-edges are then checked against the out-edges, referrers in block order.
  Fixture f(600);
  for (int from = 3; from < 303; ++from) f.link(from, 0, 0);
  for (int from = 303; from < 558; ++from) f.link(from, 1, 1);
  for (int from = 558; from < 600; ++from) f.link(from, 2, 2);
  f.link(0, 2, 0);
  f.link(1, 2, 0, 8);
  const BlockIndex g_index(f.heap);
  const ReferenceGraph g(f.image, g_index, f.roots, 2);
  std::vector<std::vector<std::uint32_t>> expected(600);
  for (BlockId b = 0; b < 600; ++b)
    for (const std::uint32_t e : g.out_edges(b)) expected[edge_target(e)].push_back(b | (e & kInteriorBit));
  CHECK(expected[0].size() == 300);
  CHECK(expected[1].size() == 255);
  CHECK(expected[2].size() == 44);
  for (BlockId b = 0; b < 600; ++b) {
    const std::span<const std::uint32_t> in = g.in_edges(b);
    CHECK(std::vector<std::uint32_t>(in.begin(), in.end()) == expected[b]);
  }
}

TEST_CASE("reference graph: the workers' slices cover every block once, whatever the blocks' sizes") {
  // 20,000 blocks, the first quarter of 512-byte chunks and the rest of 32: slices of equal bytes are not
  // slices of equal counts. Each block points to the next; the last to none.
  constexpr Address kHeap = 0x555555600000;
  constexpr int kBlocks = 20000, kBig = kBlocks / 4;
  heapscope::testing::FakeImage image;
  HeapModel heap;
  Address at = kHeap;
  for (int i = 0; i < kBlocks; ++i) {
    Block b;
    b.chunk = at;
    b.size_units = i < kBig ? 32 : 2;
    heap.blocks.push_back(b);
    at += b.chunk_size();
  }
  image.add_region(kHeap, at - kHeap);
  for (int i = 0; i + 1 < kBlocks; ++i) image.put(heap.blocks[i].address(), heap.blocks[i + 1].address());
  ArenaInfo arena;
  arena.heaps.push_back({kHeap, at});
  heap.arenas.push_back(arena);
  RootSet roots;
  const BlockIndex index(heap);
  for (const unsigned workers : {1u, 2u, 3u}) {
    INFO(workers << " workers");
    const ReferenceGraph g(image, index, roots, workers);
    CHECK(g.edge_count() == kBlocks - 1);
    REQUIRE(g.forward_parts().size() == workers);
    BlockId next = 0;
    for (const ReferenceGraph::ForwardPart& part : g.forward_parts()) {
      CHECK(part.last > part.first);
      CHECK(part.first == next);
      CHECK(part.offsets->size() == part.last - part.first);
      next = part.last;
    }
    CHECK(next == kBlocks);
    // Equal bytes: half the heap's 3,040,000 bytes lie in the first 2,969 big blocks (sampled, so about).
    if (workers == 2) CHECK(std::abs(static_cast<int>(g.forward_parts()[0].last) - 2969) <= 64);
    bool all_right = true;
    for (BlockId b = 0; b < kBlocks; ++b) {
      const auto out = g.out_edges(b);
      const bool last = b + 1 == kBlocks;
      all_right = all_right && out.size() == (last ? 0u : 1u) && (last || out[0] == b + 1);
    }
    CHECK(all_right);
  }
}

TEST_CASE("block index: a heap large enough for its page table to be filled by several workers") {
  // A 64 MiB segment (a quarter of a million 256-byte pages) of chunks from 32 bytes to 4 KiB: every
  // address is looked up against the block that holds it, around the workers' seams too.
  constexpr Address kHeap = 0x7f0000000000;
  HeapModel heap;
  Address at = kHeap;
  std::uint32_t units = 2;
  while (at < kHeap + (64u << 20)) {
    Block b;
    b.chunk = at;
    b.size_units = units;
    heap.blocks.push_back(b);
    at += b.chunk_size();
    units = units * 7 % 251 + 2;  // 32 to 4032 bytes, in no order
  }
  ArenaInfo arena;
  arena.heaps.push_back({kHeap, at});
  heap.arenas.push_back(arena);
  const BlockIndex index(heap);
  bool all_found = true;
  for (BlockId b = 0; b < heap.blocks.size(); b += 7) {
    const Block& block = heap.blocks[b];
    for (const Address a : {block.address(), block.address() + block.usable_size() / 2, block.user_end() - 1})
      all_found = all_found && index.find(a) == b;
  }
  CHECK(all_found);
  CHECK(index.find(kHeap) == kNoBlock);  // a chunk header's size word
}
