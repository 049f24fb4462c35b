// Chains of same-type blocks linked one to one (queries/chains.h) on hand-made heaps: lists, rings,
// trees, and where chains of two types meet.
#include <catch2/catch.hpp>

#include <algorithm>

#include "queries/chains.h"
#include "types/type_groups.h"
#include "small_heap.h"

using namespace heapscope;

namespace {

// Untyped 24-byte blocks are all one type ("unknown (24 bytes)") unless the test names a type.
struct ChainHeap : heapscope::testing::SmallHeap {
  BlockTypes types;

  explicit ChainHeap(int blocks, std::vector<BlockState> states = {}) : SmallHeap(blocks, std::move(states)) {
    types.resize(heap.blocks.size());
  }

  void name(std::initializer_list<int> blocks, const std::string& type) {
    const std::uint32_t id = types.intern(type, Naming::dwarf);
    for (int b : blocks) types.set(b, id);
  }
  // Block i points to block i+1, for i in [first, last).
  void list(int first, int last) {
    for (int i = first; i < last; ++i) link(i, i + 1);
  }

  struct Found {
    std::vector<Chain> chains;  // ordered by head
    std::vector<std::uint32_t> depth;
  };
  Found find(std::size_t min_length = kDefaultMinChainLength) {
    const BlockIndex graph_index(heap);
    ReferenceGraph graph(image, graph_index, roots, 1);
    TypeGroups groups(heap, types);
    const auto group = group_per_block(groups, graph.block_count(),
                                       [&](BlockId b) { return is_allocated(heap.blocks[b].state); });
    Found f;
    f.depth = root_distances(graph);
    f.chains = find_chains(graph, heap, group, f.depth, min_length);
    std::sort(f.chains.begin(), f.chains.end(), [](const Chain& a, const Chain& b) { return a.head < b.head; });
    return f;
  }
};

void check_chain(const Chain& c, BlockId head, BlockId tail, std::uint32_t length, bool ring = false) {
  CHECK(c.head == head);
  CHECK(c.tail == tail);
  CHECK(c.length == length);
  CHECK(c.bytes == 24u * length);
  CHECK(c.ring == ring);
}

}  // namespace

TEST_CASE("chains: a singly linked list is one chain, headed where the root holds it") {
  ChainHeap h(5);
  h.anchor(0);
  h.list(0, 4);
  const auto f = h.find();
  REQUIRE(f.chains.size() == 1);
  check_chain(f.chains[0], 0, 4, 5);
  CHECK(f.depth[0] == 1);
  CHECK(f.depth[4] == 5);
}

TEST_CASE("chains: a doubly linked list is a chain, and a tie goes to the lower address") {
  ChainHeap h(4);
  h.anchor(0, 0);  // like std::list's sentinel: both ends held by the owner
  h.anchor(3, 1);
  h.list(0, 3);
  for (int i = 1; i < 4; ++i) h.link(i, i - 1, 1);
  const auto f = h.find();
  REQUIRE(f.chains.size() == 1);
  check_chain(f.chains[0], 0, 3, 4);
}

TEST_CASE("chains: coroutine frames pointing to their child and back to their parent are a chain") {
  // Frame 3 is the outermost (its task is held by a root); each frame points to the one it awaits and
  // back to its awaiting parent.
  ChainHeap h(6);
  h.name({0, 1, 2, 3}, "frame");
  h.anchor(3);
  for (int child = 0; child < 3; ++child) {
    h.link(child + 1, child, 0);  // parent → child
    h.link(child, child + 1, 1);  // child → awaiting parent
  }
  const auto f = h.find();
  REQUIRE(f.chains.size() == 1);
  check_chain(f.chains[0], 3, 0, 4);
}

TEST_CASE("chains: a tree is no chain, and branch points split what passes through them") {
  SECTION("a binary tree") {
    ChainHeap h(7);
    h.anchor(0);
    for (int parent = 0; parent < 3; ++parent) {
      h.link(parent, 2 * parent + 1, 0);
      h.link(parent, 2 * parent + 2, 1);
    }
    CHECK(h.find(2).chains.empty());
  }
  SECTION("a list with a side branch falls apart at the branch point") {
    ChainHeap h(9);
    h.anchor(0);
    h.list(0, 6);    // 0 → … → 6
    h.link(3, 7, 1);  // 3 also points to 7 → 8
    h.link(7, 8);
    const auto f = h.find();
    REQUIRE(f.chains.size() == 2);
    check_chain(f.chains[0], 0, 2, 3);
    check_chain(f.chains[1], 4, 6, 3);
    CHECK(h.find(2).chains.size() == 3);  // and 7 → 8
  }
}

TEST_CASE("chains: a ring is a chain headed at its block nearest a root") {
  ChainHeap h(4);
  h.list(0, 3);
  h.link(3, 0);
  h.anchor(2);
  const auto f = h.find();
  REQUIRE(f.chains.size() == 1);
  check_chain(f.chains[0], 2, 1, 4, true);  // going round from the head follows the links: 2 → 3 → 0 → 1
}

TEST_CASE("chains: chains of two types that touch stay apart") {
  ChainHeap h(6);
  h.name({0, 1, 2}, "A");
  h.name({3, 4, 5}, "B");
  h.anchor(0);
  h.list(0, 5);
  const auto f = h.find();
  REQUIRE(f.chains.size() == 2);
  check_chain(f.chains[0], 0, 2, 3);
  check_chain(f.chains[1], 3, 5, 3);
  CHECK(f.depth[3] == 4);
}

TEST_CASE("chains: shorter than --min-length are left out") {
  ChainHeap h(12);
  h.list(0, 1);   // 2 blocks
  h.list(3, 5);   // 3 blocks
  h.list(7, 11);  // 5 blocks
  CHECK(h.find(2).chains.size() == 3);
  CHECK(h.find(3).chains.size() == 2);
  CHECK(h.find(5).chains.size() == 1);
  CHECK(h.find(6).chains.empty());
  CHECK(h.find(0).chains.size() == 3);  // one block is never a chain
}

TEST_CASE("chains: the head is the end nearest a root, else where the links start") {
  ChainHeap h(8);
  h.list(0, 3);  // 0 → 1 → 2 → 3, held in the middle
  h.anchor(2);
  for (int i = 7; i > 5; --i) h.link(i, i - 1);  // 7 → 6 → 5: leaked
  const auto f = h.find();
  REQUIRE(f.chains.size() == 2);
  check_chain(f.chains[0], 3, 0, 4);
  CHECK(f.depth[3] == 2);
  check_chain(f.chains[1], 7, 5, 3);
  CHECK(f.depth[7] == kUnreached);
}

TEST_CASE("chains: pointers to itself, repeated pointers and interior pointers count once") {
  ChainHeap h(3);
  h.anchor(0);
  for (int i = 0; i < 3; ++i) h.link(i, i, 2);  // each block points to itself
  h.link(0, 1, 0);
  h.link(0, 1, 1, 8);  // and twice to its successor, once inside it
  h.link(1, 2, 0);
  h.link(1, 2, 1);
  const auto f = h.find();
  REQUIRE(f.chains.size() == 1);
  check_chain(f.chains[0], 0, 2, 3);
}

TEST_CASE("chains: free blocks take no part") {
  ChainHeap h(5, {BlockState::in_use, BlockState::in_use, BlockState::tcache, BlockState::in_use, BlockState::in_use});
  h.anchor(0);
  h.list(0, 4);  // the pointer into block 2 points into a cached chunk: no edge
  CHECK(h.find(2).chains.size() == 2);
  CHECK(h.find(3).chains.empty());
}
