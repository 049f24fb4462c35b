// Dominators (semi-NCA) against the definition, on thousands of random graphs with fixed seeds:
// d dominates v iff v is reachable from the entry and removing d makes it unreachable. Then the
// retention analysis's tree (super-root → kinds → roots → blocks) and retained sizes on a hand-made heap.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <random>

#include "model/dominator_walk.h"
#include "model/dominators.h"
#include "model/graph_closure.h"
#include "model/leak_verdicts.h"
#include "model/retention.h"
#include "fake_image.h"

using namespace heapscope;

namespace {

// Adjacency lists in both directions; an edge may carry the flag bit the reference graph uses for
// interior pointers, which the algorithm must ignore.
class TestGraph final : public DominatorGraph {
 public:
  explicit TestGraph(std::uint32_t nodes) : succ_(nodes), pred_(nodes) {}
  void add_edge(std::uint32_t from, std::uint32_t to, bool flagged = false) {
    succ_[from].push_back(to | (flagged ? 0x80000000u : 0u));
    pred_[to].push_back(from | (flagged ? 0x80000000u : 0u));
  }
  std::uint32_t node_count() const override { return static_cast<std::uint32_t>(succ_.size()); }
  std::span<const std::uint32_t> successors(std::uint32_t v) const override { return succ_[v]; }
  AdjacentLists predecessors(std::uint32_t v) const override {
    // Split in two lists, as the retention graph does (blocks, then roots).
    const std::span<const std::uint32_t> all = pred_[v];
    const std::size_t half = all.size() / 2;
    return {all.first(half), all.subspan(half)};
  }
  const std::vector<std::uint32_t>& out(std::uint32_t v) const { return succ_[v]; }

 private:
  std::vector<std::vector<std::uint32_t>> succ_, pred_;
};

// Nodes reached from `entry` without passing through `removed` (kNoNode: remove nothing).
std::vector<char> reached_without(const TestGraph& g, std::uint32_t entry, std::uint32_t removed) {
  std::vector<char> seen(g.node_count(), 0);
  if (entry == removed) return seen;
  std::vector<std::uint32_t> stack{entry};
  seen[entry] = 1;
  while (!stack.empty()) {
    const std::uint32_t v = stack.back();
    stack.pop_back();
    for (std::uint32_t e : g.out(v)) {
      const std::uint32_t t = e & kNodeMask;
      if (t == removed || seen[t]) continue;
      seen[t] = 1;
      stack.push_back(t);
    }
  }
  return seen;
}

// Immediate dominators by the definition: the strict dominators of v form a chain, and the immediate
// one is the strict dominator with the most dominators of its own.
std::vector<std::uint32_t> brute_force_idom(const TestGraph& g, std::uint32_t entry) {
  const std::uint32_t n = g.node_count();
  const std::vector<char> reachable = reached_without(g, entry, kNoNode);
  std::vector<std::vector<char>> dominated_by(n, std::vector<char>(n, 0));  // [d][v]: d strictly dominates v
  std::vector<std::size_t> dominator_count(n, 0);
  for (std::uint32_t d = 0; d < n; ++d) {
    if (!reachable[d]) continue;
    const std::vector<char> without = reached_without(g, entry, d);
    for (std::uint32_t v = 0; v < n; ++v)
      if (v != d && reachable[v] && !without[v]) {
        dominated_by[d][v] = 1;
        ++dominator_count[v];
      }
  }
  std::vector<std::uint32_t> idom(n, kNoNode);
  for (std::uint32_t v = 0; v < n; ++v) {
    if (!reachable[v] || v == entry) continue;
    for (std::uint32_t d = 0; d < n; ++d)
      if (dominated_by[d][v] && (idom[v] == kNoNode || dominator_count[d] > dominator_count[idom[v]])) idom[v] = d;
  }
  return idom;
}

// The reachable nodes, as the preorder and the lone leaves give them (a node given twice counts twice).
std::size_t given(const Dominators& d) { return d.preorder.size() + d.lone_leaves.count(); }

// Checks the promises of the preorder and the lone leaves: between them exactly the reachable nodes, the
// entry first in the preorder, dominators before the nodes they dominate, and no lone leaf dominating any.
void check_preorder(const TestGraph& g, std::uint32_t entry, const Dominators& d) {
  const std::vector<char> reachable = reached_without(g, entry, kNoNode);
  REQUIRE(!d.preorder.empty());
  CHECK(d.preorder.front() == entry);
  CHECK(given(d) == static_cast<std::size_t>(std::count(reachable.begin(), reachable.end(), 1)));
  std::vector<std::size_t> position(g.node_count(), SIZE_MAX);
  for (std::size_t i = 0; i < d.preorder.size(); ++i) position[d.preorder[i]] = i;
  d.lone_leaves.for_each_set([&](std::size_t v) {
    CHECK(reachable[v]);
    CHECK(position[v] == SIZE_MAX);
  });
  for (std::uint32_t v = 0; v < g.node_count(); ++v) {
    if (d.idom[v] == kNoNode) continue;
    CHECK_FALSE(d.lone_leaves.test(d.idom[v]));
    if (!d.lone_leaves.test(v)) CHECK(position[d.idom[v]] < position[v]);
  }
}

// A random graph: `nodes` nodes, about `edges_per_node` edges each, with self loops, duplicate edges,
// cycles and parts the entry cannot reach. Like the heap graph, the entry (the last node) fans out to a
// few "roots".
TestGraph random_graph(std::mt19937& rng, std::uint32_t nodes, double edges_per_node) {
  TestGraph g(nodes);
  std::uniform_int_distribution<std::uint32_t> any(0, nodes - 1);
  std::bernoulli_distribution flag(0.2);
  const auto edges = static_cast<std::uint64_t>(edges_per_node * nodes);
  for (std::uint64_t i = 0; i < edges; ++i) g.add_edge(any(rng), any(rng), flag(rng));
  const std::uint32_t entry = nodes - 1;
  const std::uint32_t fan_out = std::uniform_int_distribution<std::uint32_t>(1, 4)(rng);
  for (std::uint32_t i = 0; i < fan_out; ++i) g.add_edge(entry, any(rng));
  return g;
}

}  // namespace

TEST_CASE("dominators: thousands of random graphs agree with the brute-force definition", "[dominators]") {
  std::mt19937 rng(20240501);
  const double densities[] = {0.5, 1.0, 1.5, 2.5, 4.0};
  int cases = 0, mismatches = 0;
  for (int round = 0; round < 600; ++round) {
    for (double density : densities) {
      const std::uint32_t nodes = std::uniform_int_distribution<std::uint32_t>(1, 60)(rng);
      const TestGraph g = random_graph(rng, nodes, density);
      const std::uint32_t entry = nodes - 1;
      const Dominators d = compute_dominators(g, entry);
      const std::vector<std::uint32_t> expected = brute_force_idom(g, entry);
      ++cases;
      if (d.idom != expected) {
        ++mismatches;
        if (mismatches <= 3) CHECK(d.idom == expected);  // show a few, not thousands
      }
      check_preorder(g, entry, d);
    }
  }
  CHECK(cases == 3000);
  CHECK(mismatches == 0);
}

// The graph less every edge into what the entry's first successor reaches from a node outside it (but the
// entry): the graph whose dominators FirstReach::owned gives.
TestGraph without_edges_into_first_reach(const TestGraph& g, std::uint32_t entry) {
  std::uint32_t first = kNoNode;
  for (std::uint32_t e : g.out(entry))
    if ((e & kNodeMask) != entry) {
      first = e & kNodeMask;
      break;
    }
  std::vector<char> inside(g.node_count(), 0);
  if (first != kNoNode) inside = reached_without(g, first, entry);
  TestGraph out(g.node_count());
  for (std::uint32_t u = 0; u < g.node_count(); ++u)
    for (std::uint32_t e : g.out(u)) {
      const std::uint32_t v = e & kNodeMask;
      if (inside[v] && !inside[u] && u != entry) continue;
      out.add_edge(u, v, (e & ~kNodeMask) != 0);
    }
  return out;
}

TEST_CASE("dominators: an owned first reach is dominated as if nothing outside it pointed in", "[dominators]") {
  // Random graphs as above; the answer on the whole graph with FirstReach::owned must be the brute force's
  // on the graph without the edges into the first successor's reach from outside it.
  std::mt19937 rng(20261128);
  int cases = 0, mismatches = 0, cut = 0;
  for (int round = 0; round < 500; ++round) {
    for (double density : {0.8, 1.5, 3.0}) {
      const std::uint32_t nodes = std::uniform_int_distribution<std::uint32_t>(2, 60)(rng);
      const TestGraph g = random_graph(rng, nodes, density);
      const std::uint32_t entry = nodes - 1;
      const TestGraph edited = without_edges_into_first_reach(g, entry);
      const Dominators d = compute_dominators(g, entry, FirstReach::owned);
      const std::vector<std::uint32_t> expected = brute_force_idom(edited, entry);
      ++cases;
      cut += brute_force_idom(g, entry) != expected;  // cases where owning changes the answer
      if (d.idom != expected) {
        ++mismatches;
        if (mismatches <= 3) CHECK(d.idom == expected);
      }
      check_preorder(edited, entry, d);
    }
  }
  CHECK(cases == 1500);
  CHECK(mismatches == 0);
  CHECK(cut > 100);  // the option is exercised, not only graphs it does not change
}

TEST_CASE("dominators: larger random graphs agree with the brute-force definition", "[dominators]") {
  std::mt19937 rng(7);
  for (std::uint32_t nodes : {300u, 1000u, 2000u}) {
    for (double density : {1.2, 3.0}) {
      const TestGraph g = random_graph(rng, nodes, density);
      const Dominators d = compute_dominators(g, nodes - 1);
      const std::vector<std::uint32_t> expected = brute_force_idom(g, nodes - 1);
      std::size_t wrong = 0;
      for (std::uint32_t v = 0; v < nodes; ++v) wrong += d.idom[v] != expected[v];
      INFO(nodes << " nodes, density " << density);
      CHECK(wrong == 0);
      check_preorder(g, nodes - 1, d);
    }
  }
}

TEST_CASE("dominators: a diamond, a loop and an unreachable node", "[dominators]") {
  // 0 → 1, 0 → 2, 1 → 3, 2 → 3, 3 → 4, 4 → 3 (loop), 5 unreachable → 3
  TestGraph g(6);
  g.add_edge(0, 1);
  g.add_edge(0, 2);
  g.add_edge(1, 3);
  g.add_edge(2, 3);
  g.add_edge(3, 4);
  g.add_edge(4, 3);
  g.add_edge(5, 3);
  const Dominators d = compute_dominators(g, 0);
  CHECK(d.idom == std::vector<std::uint32_t>{kNoNode, 0, 0, 0, 3, kNoNode});
  CHECK(given(d) == 5);
}

TEST_CASE("dominators: a single entry with no edges", "[dominators]") {
  TestGraph g(3);
  const Dominators d = compute_dominators(g, 1);
  CHECK(d.idom == std::vector<std::uint32_t>(3, kNoNode));
  CHECK(d.preorder == std::vector<std::uint32_t>{1});
  CHECK(d.lone_leaves.count() == 0);
}

TEST_CASE("dominators: a doubly linked list of a million nodes needs no recursion", "[dominators]") {
  // Each node is dominated by the one before it, however the back pointers go.
  constexpr std::uint32_t kNodes = 1'000'000;
  TestGraph g(kNodes);
  for (std::uint32_t i = 0; i + 1 < kNodes; ++i) {
    g.add_edge(i, i + 1);
    g.add_edge(i + 1, i, true);
  }
  const Dominators d = compute_dominators(g, 0);
  bool chain = d.idom[0] == kNoNode;
  for (std::uint32_t i = 1; i < kNodes && chain; ++i) chain = d.idom[i] == i - 1;
  CHECK(chain);
  CHECK(given(d) == kNodes);
}

TEST_CASE("dominators: a list whose every node the entry also reaches is flat", "[dominators]") {
  // entry → each node, and node i → i+1: nobody but the entry dominates anything.
  constexpr std::uint32_t kNodes = 200'000;
  TestGraph g(kNodes + 1);
  for (std::uint32_t i = 0; i < kNodes; ++i) {
    g.add_edge(kNodes, i);
    if (i + 1 < kNodes) g.add_edge(i, i + 1);
  }
  const Dominators d = compute_dominators(g, kNodes);
  bool flat = true;
  for (std::uint32_t i = 0; i < kNodes && flat; ++i) flat = d.idom[i] == kNodes;
  CHECK(flat);
}

// ---- retention: the dominator tree over a hand-made heap ----

namespace {

constexpr Address kHeapStart = 0x555555560000;
constexpr Address kMappingA = 0x7f0000000000, kMappingB = 0x7f0000100000, kStack = 0x7ffff0000000;

// Ten 32-byte chunks (24 usable bytes each); block 8 sits in a tcache. Roots: two anonymous mappings and
// the stack of one thread.
struct RetentionFixture {
  heapscope::testing::FakeImage image;
  HeapModel heap;
  RootSet roots;

  RetentionFixture() {
    image.add_region(kHeapStart, 0x1000);
    image.add_thread(42, 0, kStack + 0x100);
    for (int i = 0; i < 10; ++i) {
      Block b;
      b.chunk = kHeapStart + 32 * i;
      b.size_units = 2;
      b.state = i == 8 ? BlockState::tcache : BlockState::in_use;
      heap.blocks.push_back(b);
    }
    ArenaInfo arena;
    arena.heaps.push_back({kHeapStart, kHeapStart + 0x1000});
    heap.arenas.push_back(arena);
    add_root(RootKind::anonymous, kMappingA);
    add_root(RootKind::anonymous, kMappingB);
    add_root(RootKind::stack, kStack);
  }
  void add_root(RootKind kind, Address start) {
    image.add_region(start, 0x1000);
    RootRange r;
    r.kind = kind;
    r.start = start;
    r.end = start + 0x1000;
    r.anchor = start;
    roots.ranges.push_back(r);
  }
  static Address user(int i) { return kHeapStart + 32 * i + 16; }
  void link(int from, int to, int word = 0) { image.put(user(from) + 8 * word, user(to)); }
  void hold(Address root, int slot, int to) { image.put(root + 8 * slot, user(to)); }
};

}  // namespace

namespace {

// The node of the ownership tree labelled `label`.
std::uint32_t node_labelled(const Retention& r, const std::string& label) {
  for (std::size_t i = 0; i < r.root_nodes().size(); ++i)
    if (r.root_nodes()[i].label == label) return r.root_node_id(i);
  FAIL("no root node labelled " << label);
  return kNoNode;
}

}  // namespace

TEST_CASE("retention: blocks, owners, owner kinds and the super-root", "[dominators][retention]") {
  RetentionFixture f;
  f.hold(kMappingA, 0, 0);  // mapping A → 0 → 1 → 2, 0 → 3: a small tree
  f.link(0, 1);
  f.link(1, 2);
  f.link(0, 3, 1);
  f.hold(kMappingA, 1, 4);  // 4: held by mapping A and the stack, owners of two kinds
  f.hold(kStack, 0, 4);
  f.hold(kMappingA, 2, 5);  // 5: mapping A alone
  f.hold(kMappingA, 3, 6);  // 6: both mappings, one owner kind
  f.hold(kMappingB, 0, 6);
  f.link(9, 0);  // 9 is leaked and points into the tree: no say in who dominates it; 7 is leaked alone

  const BlockIndex graph_index(f.heap);
  const ReferenceGraph graph(f.image, graph_index, f.roots, 2);
  const SymbolIndex symbols(f.image, {});
  const Retention r(f.image, symbols, f.heap, f.roots, graph);

  // anonymous kind → A, B; thread kind → thread 1 → its stack.
  REQUIRE(r.root_nodes().size() == 6);
  const std::uint32_t a = node_labelled(r, fmt::format("anonymous mapping 0x{:x}-0x{:x}", kMappingA, kMappingA + 0x1000));
  const std::uint32_t b = node_labelled(r, fmt::format("anonymous mapping 0x{:x}-0x{:x}", kMappingB, kMappingB + 0x1000));
  const std::uint32_t thread = node_labelled(r, "thread 1 (tid 42)");
  const std::uint32_t stack = node_labelled(r, "stack of thread 1 (tid 42)");
  const std::uint32_t anonymous = r.owner_kind_node(OwnerKind::anonymous), threads = r.owner_kind_node(OwnerKind::thread);
  CHECK(r.owner_kind_node(OwnerKind::global) == kNoNode);
  CHECK(r.root(stack).thread == 0);
  CHECK(r.root(stack).level == RootNode::Level::part);
  CHECK(r.root(thread).level == RootNode::Level::owner);
  CHECK(r.root(a).level == RootNode::Level::owner);
  CHECK_FALSE(r.is_holder(anonymous));
  CHECK(r.is_holder(stack));

  CHECK(r.dominator(0) == a);
  CHECK(r.dominator(1) == 0);
  CHECK(r.dominator(2) == 1);
  CHECK(r.dominator(3) == 0);
  CHECK(r.dominator(4) == r.super_root());
  CHECK(r.dominator(5) == a);
  CHECK(r.dominator(6) == anonymous);
  CHECK(r.dominator(a) == anonymous);
  CHECK(r.dominator(b) == anonymous);
  CHECK(r.dominator(stack) == thread);
  CHECK(r.dominator(thread) == threads);
  CHECK(r.dominator(threads) == r.super_root());
  for (BlockId leaked_or_free : {7u, 8u, 9u}) CHECK_FALSE(r.reachable(leaked_or_free));

  CHECK(r.retained_bytes(2) == 24);
  CHECK(r.retained_bytes(0) == 4 * 24);
  CHECK(r.retained_blocks(0) == 4);
  CHECK(r.retained_bytes(a) == 5 * 24);
  CHECK(r.retained_bytes(b) == 0);
  CHECK(r.retained_bytes(stack) == 0);
  CHECK(r.retained_bytes(anonymous) == 6 * 24);
  CHECK(r.retained_bytes(threads) == 0);
  CHECK(r.retained_bytes(r.super_root()) == 7 * 24);
  CHECK(r.retained_blocks(r.super_root()) == 7);
  CHECK(r.in_use_bytes() == 9 * 24);  // block 8 is free
  CHECK(r.in_use_blocks() == 9);

}

TEST_CASE("retention: a register holding what its thread's stack holds is a working copy: the stack is charged. What two threads hold is the kind's",
          "[dominators][retention]") {
  RetentionFixture f;
  f.image.add_thread(43, 0, kMappingB + 0x100);
  f.roots.ranges.pop_back();  // the stack root: re-added per thread below
  RootRange stack1{}, stack2{}, registers1{};
  stack1.kind = stack2.kind = RootKind::stack;
  stack1.start = kStack, stack1.end = kStack + 0x1000, stack1.thread = 0;
  stack2.start = kMappingB, stack2.end = kMappingB + 0x1000, stack2.thread = 1;
  registers1.kind = RootKind::registers, registers1.thread = 0;
  f.roots.ranges = {stack1, stack2, registers1};
  f.image.set_register(0, Reg::rbx, RetentionFixture::user(0));  // block 0: thread 1's rbx and its stack
  f.hold(kStack, 0, 0);
  f.link(0, 1);
  f.hold(kStack, 1, 2);   // block 2: both threads' stacks
  f.hold(kMappingB, 0, 2);
  f.hold(kMappingB, 1, 3);  // block 3: thread 2's stack alone

  const BlockIndex graph_index(f.heap);
  const ReferenceGraph graph(f.image, graph_index, f.roots, 1);
  const SymbolIndex symbols(f.image, {});
  const Retention r(f.image, symbols, f.heap, f.roots, graph);

  const std::uint32_t thread1 = node_labelled(r, "thread 1 (tid 42)");
  const std::uint32_t thread1_stack = node_labelled(r, "stack of thread 1 (tid 42)");
  const std::uint32_t thread2_stack = node_labelled(r, "stack of thread 2 (tid 43)");
  CHECK(r.dominator(0) == thread1_stack);  // rbx is a working copy of the stack slot (retention.h)
  CHECK(r.dominator(thread1_stack) == thread1);
  CHECK(r.retained_bytes(thread1) == 2 * 24);
  CHECK(r.retained_bytes(node_labelled(r, "registers of thread 1 (tid 42)")) == 0);
  CHECK(r.retained_bytes(thread1_stack) == 2 * 24);
  CHECK(r.dominator(2) == r.owner_kind_node(OwnerKind::thread));
  CHECK(r.dominator(3) == thread2_stack);
  CHECK(r.retained_bytes(r.owner_kind_node(OwnerKind::thread)) == 4 * 24);
}

TEST_CASE("retention: a registration's slot inside a bookkeeping block holds its object, not the block",
          "[dominators][retention]") {
  RetentionFixture f;
  // Block 0 is the runtime's list (held by mapping A); its word 1 is registration 0's slot, pointing to
  // block 1 (the registration's object, which owns block 2); its word 2 points to block 3 as plain data.
  f.hold(kMappingA, 0, 0);
  f.link(0, 1, 1);
  f.link(1, 2);
  f.link(0, 3, 2);
  FinalizerRegistration reg;
  reg.slot_start = RetentionFixture::user(0) + 8;
  reg.slot_end = reg.slot_start + 8;
  f.roots.finalizers.push_back(reg);
  RootRange slot{};
  slot.kind = RootKind::finalizer;
  slot.start = reg.slot_start;
  slot.end = reg.slot_end;
  slot.thread = FinalizerRegistration::kNoThread;  // process-wide
  slot.anchor = 0;
  slot.label = "exit handler f(void*) (cxa_atexit) argument";
  f.roots.ranges.push_back(slot);

  const BlockIndex graph_index(f.heap);
  const ReferenceGraph graph(f.image, graph_index, f.roots, 1);
  const SymbolIndex symbols(f.image, {});
  const Retention r(f.image, symbols, f.heap, f.roots, graph);

  const std::uint32_t registration = node_labelled(r, slot.label);
  CHECK(r.root(registration).level == RootNode::Level::owner);
  CHECK(r.dominator(1) == registration);
  CHECK(r.retained_bytes(registration) == 2 * 24);
  CHECK(r.dominator(3) == 0);  // a word that is no slot stays an edge of the list
  CHECK(r.retained_bytes(0) == 2 * 24);
}

TEST_CASE("retention: an empty heap and rootless blocks", "[dominators][retention]") {
  RetentionFixture f;
  const BlockIndex graph_index(f.heap);
  const ReferenceGraph graph(f.image, graph_index, f.roots, 1);
  const SymbolIndex symbols(f.image, {});
  const Retention r(f.image, symbols, f.heap, f.roots, graph);
  CHECK(r.retained_bytes(r.super_root()) == 0);
  for (BlockId blk = 0; blk < 10; ++blk) CHECK_FALSE(r.reachable(blk));
  CHECK(r.in_use_blocks() == 9);
}

// ---- graph_closure: what one block's commands ask without the whole tree ----

TEST_CASE("retained_by_removal gives the dominator tree's retained sizes", "[dominators][retention]") {
  // Random heaps: 60 blocks, random pointers among them (some into interiors, some from leaked blocks),
  // a few roots. Every block's size by removal must equal Retention's.
  std::mt19937 random(7);
  for (int round = 0; round < 150; ++round) {
    RetentionFixture f;
    f.heap.blocks = BlockArray();
    for (int i = 0; i < 60; ++i) {
      Block b;
      b.chunk = kHeapStart + 32 * i;
      b.size_units = 2;
      b.state = i % 17 == 5 ? BlockState::free : BlockState::in_use;
      f.heap.blocks.push_back(b);
    }
    for (int i = 0; i < 60; ++i)
      for (int word = 0; word < 2; ++word)
        if (random() % 3 == 0) f.image.put(RetentionFixture::user(i) + 8 * word, RetentionFixture::user(random() % 60) + (random() % 4 == 0 ? 8 : 0));
    for (int slot = 0; slot < 3; ++slot) f.hold(round % 2 ? kMappingA : kStack, slot, static_cast<int>(random() % 60));
    if (round % 3 == 0) {  // a global too: what it holds, others only borrow
      constexpr Address kGlobal = 0x7f0000200000;
      f.add_root(RootKind::global, kGlobal);
      for (int slot = 0; slot < 2; ++slot) f.hold(kGlobal, slot, static_cast<int>(random() % 60));
    }

    const BlockIndex index(f.heap);
    const ReferenceGraph graph(f.image, index, f.roots, 1);
    const SymbolIndex symbols(f.image, {});
    const RetentionEdges edges(graph, f.roots);
    const Retention tree(f.image, symbols, f.heap, f.roots, graph);  // its own edges: borrowing left to the tree
    const LeakVerdicts verdicts = compute_verdicts(graph, f.heap);
    for (BlockId b = 0; b < 60; ++b) {
      if (!is_allocated(f.heap.blocks[b].state)) continue;
      std::uint64_t budget = 1'000'000;
      const std::optional<std::uint64_t> bytes = retained_by_removal(graph, edges, f.heap, verdicts, b, &budget);
      REQUIRE(bytes);
      INFO("round " << round << " block " << b);
      CHECK(*bytes == tree.retained_bytes(b));
    }
  }
}

TEST_CASE("dominator walk: owners and piles as the definition gives them, on one worker or several",
          "[dominators][retention]") {
  // Random heaps with long runs (block i pointing to i + 1) and random pointers; a block's type is its id
  // modulo 3, or 4 for most of a run, so that runs of one type pile up. Every answer is checked against
  // the definition, climbing the dominators one by one, for 1, 2 and 3 workers (the parallel walk races
  // on shared paths and must still agree).
  std::mt19937 random(11);
  for (int round = 0; round < 30; ++round) {
    RetentionFixture f;
    f.image.add_region(kHeapStart, 0x4000);
    f.heap.blocks = BlockArray();
    constexpr int kBlocks = 300;
    for (int i = 0; i < kBlocks; ++i) {
      Block b;
      b.chunk = kHeapStart + 32 * i;
      b.size_units = 2;
      f.heap.blocks.push_back(b);
    }
    for (int i = 0; i + 1 < kBlocks; ++i)
      if (random() % 8 != 0) f.link(i, i + 1);
    for (int i = 0; i < kBlocks; ++i)
      if (random() % 6 == 0) f.link(i, static_cast<int>(random() % kBlocks), 1);
    for (int slot = 0; slot < 4; ++slot) f.hold(kStack, slot, static_cast<int>(random() % kBlocks));
    f.hold(kMappingA, 0, 0);
    const BlockIndex index(f.heap);
    const ReferenceGraph graph(f.image, index, f.roots, 1);
    const SymbolIndex symbols(f.image, {});
    const Retention r(f.image, symbols, f.heap, f.roots, graph);
    std::vector<int> type(kBlocks);
    for (int i = 0; i < kBlocks; ++i) type[i] = random() % 5 == 0 ? i % 3 : 4;
    auto same = [&](BlockId a, BlockId b) { return type[a] == type[b]; };
    std::vector<std::uint32_t> owners;  // a few blocks no other owner dominates
    for (BlockId b = 0; b < kBlocks && owners.size() < 4; b += 37) {
      if (!r.reachable(b)) continue;
      bool nested = false;
      for (const std::uint32_t o : owners)
        for (std::uint32_t up = b; up != r.super_root() && !nested; up = r.dominator(up)) nested = up == o;
      for (const std::uint32_t o : owners)
        for (std::uint32_t up = o; up != r.super_root() && !nested; up = r.dominator(up)) nested = up == b;
      if (!nested) owners.push_back(b);
    }
    std::vector<std::uint64_t> expected_piled(r.node_count(), 0);
    std::vector<OwnerIndex> expected_owner(r.block_count(), kNoOwner);
    std::vector<std::uint32_t> expected_under(r.block_count(), kNoNode);
    for (BlockId b = 0; b < kBlocks; ++b) {
      if (!r.reachable(b)) continue;
      for (std::uint32_t up = b; up != r.super_root(); up = r.dominator(up))
        if (const auto o = std::find(owners.begin(), owners.end(), up); o != owners.end()) {
          expected_owner[b] = static_cast<OwnerIndex>(o - owners.begin());
          break;
        }
      std::uint32_t at = b;
      while (r.is_block(r.dominator(at)) && same(r.dominator(at), b)) at = r.dominator(at);
      expected_under[b] = r.dominator(at);
      ++expected_piled[expected_under[b]];
    }
    for (unsigned workers : {1u, 2u, 3u}) {
      INFO("round " << round << ", " << workers << " workers");
      // What each() is told: every reachable block once, with its owner, each worker in block order.
      std::vector<std::vector<std::pair<BlockId, OwnerIndex>>> told(workers);
      const std::vector<OwnerIndex> owner = owners_of_nodes(
          r, owners, workers, [&](unsigned w, BlockId b, OwnerIndex o) { told[w].emplace_back(b, o); });
      std::vector<std::pair<BlockId, OwnerIndex>> told_all;
      for (const auto& worker_told : told) {
        CHECK(std::is_sorted(worker_told.begin(), worker_told.end()));
        told_all.insert(told_all.end(), worker_told.begin(), worker_told.end());
      }
      std::sort(told_all.begin(), told_all.end());
      std::vector<std::pair<BlockId, OwnerIndex>> expected_told;
      for (BlockId b = 0; b < kBlocks; ++b)
        if (r.reachable(b)) expected_told.emplace_back(b, expected_owner[b]);
      CHECK(told_all == expected_told);
      const Piles piles(r, same, workers);
      for (BlockId b = 0; b < kBlocks; ++b) {
        if (!r.reachable(b)) continue;
        INFO("block " << b);
        CHECK(owner[b] == expected_owner[b]);
        CHECK(piles.under(b) == expected_under[b]);
      }
      for (std::uint32_t node = 0; node < r.node_count(); ++node) {
        INFO("node " << node);
        CHECK(piles.count(node) == expected_piled[node]);
      }
    }
  }
}

TEST_CASE("dominator walk: a pile past a byte's count is counted whole", "[dominators][retention]") {
  // A list of 1,000 blocks of one type held by a mapping: all pile up under the first one's dominator, the
  // mapping's node (no block), past the byte's 255.
  RetentionFixture f;
  constexpr int kBlocks = 1000;
  f.image.add_region(kHeapStart, 32 * kBlocks);
  f.heap.blocks = BlockArray();
  for (int i = 0; i < kBlocks; ++i) {
    Block b;
    b.chunk = kHeapStart + 32 * i;
    b.size_units = 2;
    f.heap.blocks.push_back(b);
  }
  for (int i = 0; i + 1 < kBlocks; ++i) f.link(i, i + 1);
  f.hold(kMappingA, 0, 0);
  const BlockIndex index(f.heap);
  const ReferenceGraph graph(f.image, index, f.roots, 1);
  const SymbolIndex symbols(f.image, {});
  const Retention r(f.image, symbols, f.heap, f.roots, graph);
  const std::uint32_t holder = r.dominator(0);
  REQUIRE(!r.is_block(holder));
  for (unsigned workers : {1u, 2u, 3u}) {
    INFO(workers << " workers");
    const Piles piles(r, [](BlockId, BlockId) { return true; }, workers);
    CHECK(piles.count(holder) == kBlocks);
    CHECK(piles.count(0) == 0);
    for (BlockId b = 0; b < kBlocks; ++b) CHECK(piles.under(b) == holder);
  }
}

TEST_CASE("retained_by_removal stops when its budget is spent", "[dominators][retention]") {
  RetentionFixture f;
  f.hold(kMappingA, 0, 0);
  for (int i = 0; i < 6; ++i) f.link(i, i + 1);  // a chain of 7 blocks
  const BlockIndex index(f.heap);
  const ReferenceGraph graph(f.image, index, f.roots, 1);
  const RetentionEdges edges(graph, f.roots);
  const LeakVerdicts verdicts = compute_verdicts(graph, f.heap);
  std::uint64_t budget = 5;
  CHECK_FALSE(retained_by_removal(graph, edges, f.heap, verdicts, 0, &budget));
  CHECK(budget == 0);
  budget = 1000;
  CHECK(retained_by_removal(graph, edges, f.heap, verdicts, 0, &budget) == 7 * 24);
}

TEST_CASE("ancestors_of: every block that leads to the asked ones, and nothing else", "[dominators][retention]") {
  RetentionFixture f;
  f.hold(kMappingA, 0, 0);  // 0 → 1 → 2 → 3, 4 → 2, 5 → 4 (5 and 4 leaked), 6 ← 3 (a descendant only)
  f.link(0, 1);
  f.link(1, 2);
  f.link(2, 3);
  f.link(4, 2);
  f.link(5, 4);
  f.link(3, 6);
  const BlockIndex index(f.heap);
  const ReferenceGraph graph(f.image, index, f.roots, 1);
  const BlockId asked[] = {2};
  const std::vector<bool> in = ancestors_of(graph, asked);
  std::vector<BlockId> members;
  for (BlockId b = 0; b < in.size(); ++b)
    if (in[b]) members.push_back(b);
  CHECK(members == std::vector<BlockId>{0, 1, 2, 4, 5});
}

TEST_CASE("retention: what a global holds is the global's, and a thread's pointers into it are borrowed",
          "[dominators][retention]") {
  RetentionFixture f;
  constexpr Address kGlobal = 0x7f0000200000;
  f.add_root(RootKind::global, kGlobal);
  f.hold(kGlobal, 0, 0);  // global → 0 → 1
  f.link(0, 1);
  f.hold(kStack, 0, 1);   // the stack holds 1 too: borrowed
  f.hold(kStack, 1, 2);   // the stack alone → 2 → 1: 2 is the thread's, its pointer to 1 borrowed
  f.link(2, 1);
  f.hold(kStack, 2, 3);   // 3: the thread's alone
  f.hold(kMappingA, 0, 4);  // 4: a mapping and the global hold it: the global's
  f.hold(kGlobal, 1, 4);

  const BlockIndex graph_index(f.heap);
  const ReferenceGraph graph(f.image, graph_index, f.roots, 2);
  const SymbolIndex symbols(f.image, {});
  const Retention r(f.image, symbols, f.heap, f.roots, graph);

  const std::uint32_t globals = r.owner_kind_node(OwnerKind::global);
  const std::uint32_t stack = node_labelled(r, "stack of thread 1 (tid 42)");
  REQUIRE(globals != kNoNode);
  auto under = [&](std::uint32_t node, std::uint32_t ancestor) {
    for (std::uint32_t v = node; v != kNoNode; v = r.dominator(v))
      if (v == ancestor) return true;
    return false;
  };
  CHECK(r.dominator(1) == 0);
  CHECK(under(0, globals));
  CHECK(under(4, globals));
  CHECK(r.dominator(2) == stack);
  CHECK(r.dominator(3) == stack);
  CHECK(r.retained_bytes(stack) == 2 * 24);
  CHECK(r.retained_bytes(globals) == 3 * 24);
  CHECK(r.retained_bytes(r.owner_kind_node(OwnerKind::anonymous)) == 0);
  CHECK(r.retained_bytes(r.super_root()) == 5 * 24);
}

TEST_CASE("retained byte counts take high bytes only when a count may need them", "[dominators][retention]") {
  ByteCounts narrow;
  const ByteCounts::Writer small = narrow.adopt(std::vector<std::uint32_t>(3, 0), 1000);
  CHECK(narrow.high().empty());
  small.set(0, 7);
  small.add(0, 5);
  CHECK(narrow[0] == 12);
  CHECK_THROWS_AS(small.set(1, ByteCounts::kNarrowLimit), std::length_error);
  ByteCounts wide;
  const ByteCounts::Writer large = wide.adopt(std::vector<std::uint32_t>(3, 0), ByteCounts::kNarrowLimit);
  CHECK(wide.high().size() == 3);
  large.set(2, (std::uint64_t{5} << 32) + 9);
  large.add(2, 1);
  CHECK(wide[2] == (std::uint64_t{5} << 32) + 10);
  CHECK(wide[1] == 0);
  CHECK_THROWS_AS(large.set(1, ByteCounts::kLimit), std::length_error);
  // Counts filled beforehand keep their low 32 bits; the high bytes start at 0.
  ByteCounts adopted;
  const ByteCounts::Writer filled = adopted.adopt({4, 0, 6}, ByteCounts::kNarrowLimit);
  CHECK(adopted.high().size() == 3);
  CHECK(adopted[0] == 4);
  CHECK(adopted[2] == 6);
  filled.add(0, std::uint64_t{1} << 32);
  CHECK(adopted[0] == (std::uint64_t{1} << 32) + 4);
  ByteCounts adopted_narrow;
  adopted_narrow.adopt({1, 2}, 100);
  CHECK(adopted_narrow.high().empty());
  CHECK(adopted_narrow[1] == 2);
}

TEST_CASE("a heap past 4 GiB retains its sizes in full, and one under it the same without high bytes",
          "[dominators][retention]") {
  for (const bool huge : {false, true}) {
    INFO((huge ? "a 6 GiB block" : "small blocks"));
    RetentionFixture f;
    // Block 9 is a mmapped chunk, whose bytes past the image's region are not read: no edges, only its size.
    Block& big = f.heap.blocks[9];
    big.state = BlockState::mmapped;
    if (huge) big.size_units = static_cast<std::uint32_t>((std::uint64_t{6} << 30) / 16);
    f.link(0, 9);
    f.hold(kMappingA, 0, 0);
    const BlockIndex index(f.heap);
    const ReferenceGraph graph(f.image, index, f.roots, 1);
    const SymbolIndex symbols(f.image, {});
    const Retention r(f.image, symbols, f.heap, f.roots, graph);
    const std::uint64_t big_bytes = f.heap.blocks[9].usable_size();
    CHECK(r.retained_bytes(9) == big_bytes);
    CHECK(r.retained_bytes(0) == f.heap.blocks[0].usable_size() + big_bytes);
    CHECK(r.retained_bytes(r.super_root()) == r.retained_bytes(0));  // the other blocks are leaked
    const Retention::Saved saved = r.saved();
    CHECK(saved.bytes_high.empty() == !huge);
    const Retention again(r.block_count(), saved);
    for (std::uint32_t node = 0; node < r.node_count(); ++node) CHECK(again.retained_bytes(node) == r.retained_bytes(node));
  }
}
