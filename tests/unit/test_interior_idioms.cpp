// Interior-pointer idioms (model/interior_idioms.h) in the leak verdicts, on a hand-made heap of 24-byte
// blocks: memcheck's semantics — an idiom's pointer holds a block as a pointer to its start would, a
// block a real start pointer reaches too is not counted as the idiom's, and the set of idioms is the
// caller's — and heapscope's length-prefixed idiom, which counts only where enough blocks share it.
#include <catch2/catch.hpp>

#include <cstring>

#include "model/idiom_census.h"
#include "model/interior_idioms.h"
#include "model/leak_verdicts.h"
#include "model/reference_graph.h"
#include "small_heap.h"

using namespace heapscope;
using heapscope::testing::SmallHeap;

namespace {

LeakVerdicts verdicts(SmallHeap& f, IdiomSet idioms) {
  const BlockIndex index(f.heap);
  const ReferenceGraph g(f.image, index, f.roots, 2);
  return compute_verdicts(g, f.heap, idioms);
}

HeldBy held(const LeakVerdicts& v, int block) { return v.held_by.empty() ? 0 : v.held_by[block]; }

// An SDS_TYPE_5-like string in block `b`: one header byte with the length in its upper bits, the text,
// its NUL.
void short_string(SmallHeap& f, int b, const char* text) {
  std::uint64_t words[3] = {};
  auto* bytes = reinterpret_cast<unsigned char*>(words);
  bytes[0] = static_cast<unsigned char>(std::strlen(text) << 3);
  std::memcpy(bytes + 1, text, std::strlen(text) + 1);
  for (int w = 0; w < 3; ++w) f.image.put(SmallHeap::user(b) + 8 * w, words[w]);
}

}  // namespace

TEST_CASE("idioms: memcheck's names, all and none") {
  std::string error;
  CHECK(parse_idioms("all", &error) == kAllIdioms);
  CHECK(parse_idioms("none", &error) == kNoIdioms);
  CHECK(parse_idioms("stdstring,newarray", &error) == (idiom_bit(Idiom::stdstring) | idiom_bit(Idiom::newarray)));
  CHECK(parse_idioms("length-prefixed", &error) == idiom_bit(Idiom::length_prefixed));
  CHECK_FALSE(parse_idioms("stdstrings", &error));
  CHECK(error.find("unknown idiom 'stdstrings'") != std::string::npos);
}

TEST_CASE("idioms: a size fills a block when no smaller size class would hold it") {
  CHECK(fills_block(24, 24));
  CHECK(fills_block(65, 72));
  CHECK_FALSE(fills_block(73, 72));
  CHECK_FALSE(fills_block(40, 72));
  CHECK(fills_block(1000, 1024));   // a size class a quarter apart
  CHECK_FALSE(fills_block(700, 1024));
}

TEST_CASE("verdicts: a length64 pointer holds its block as a start pointer would, only with the idiom on") {
  SmallHeap f(3);
  f.image.put(SmallHeap::user(0), 16);  // 16 bytes follow the count: the whole 24-byte block
  f.anchor(0, 0, 8);
  f.link(0, 1, 1);  // what the held block points to is reached through it
  const LeakVerdicts with = verdicts(f, idiom_bit(Idiom::length64));
  CHECK(with.verdict[0] == Verdict::reachable);
  CHECK_FALSE(with.possibly[0]);
  CHECK(held_idiom(held(with, 0)) == Idiom::length64);
  CHECK(with.verdict[1] == Verdict::reachable);
  CHECK_FALSE(with.possibly[1]);
  CHECK(held(with, 1) == 0);  // reached through a start pointer
  CHECK(with.verdict[2] == Verdict::direct_leak);

  const LeakVerdicts without = verdicts(f, kNoIdioms);
  CHECK(without.possibly[0]);
  CHECK(without.possibly[1]);
  CHECK(without.held_by.empty());
}

TEST_CASE("verdicts: a block a start pointer reaches too is not counted as held by an idiom") {
  SmallHeap f(3);
  f.image.put(SmallHeap::user(1), 16);
  f.anchor(1, 0, 8);  // length64 pointer from a root
  f.anchor(0, 1);
  f.link(0, 1);       // and a start pointer from a reachable block
  const LeakVerdicts v = verdicts(f, kAllIdioms);
  CHECK(v.verdict[1] == Verdict::reachable);
  CHECK_FALSE(v.possibly[1]);
  CHECK(held(v, 1) == 0);
}

TEST_CASE("verdicts: an interior pointer no idiom explains leaves its block possibly leaked") {
  SmallHeap f(2);
  f.image.put(SmallHeap::user(0), 0x4141414141414141);  // no count, no vtable, no length
  f.anchor(0, 0, 8);
  const LeakVerdicts v = verdicts(f, kAllIdioms);
  CHECK(v.verdict[0] == Verdict::reachable);
  CHECK(v.possibly[0]);
  CHECK(v.held_by.empty());
}

TEST_CASE("verdicts: length-prefixed strings count where enough blocks share the offset") {
  for (const int strings : {3, 12}) {
    SmallHeap f(strings + 1);
    // A table in block `strings` (held from its start) points 1 byte into each string, as redis' dict
    // entries point into its keys; the table's 24 bytes hold 3 pointers, the rest come from the roots.
    f.anchor(strings, 0);
    for (int i = 0; i < strings; ++i) {
      short_string(f, i, "key:0042");
      if (i < 3) f.link(strings, i, i, 1);
      else f.anchor(i, i + 1, 1);
    }
    const LeakVerdicts v = verdicts(f, kAllIdioms);
    for (int i = 0; i < strings; ++i) {
      INFO("strings " << strings << ", block " << i);
      CHECK(v.verdict[i] == Verdict::reachable);
      CHECK(static_cast<bool>(v.possibly[i]) == (strings < 8));
      CHECK(held(v, i) == (strings < 8 ? 0 : held_by(Idiom::length_prefixed, 1)));
    }
  }
}

TEST_CASE("verdicts: blocks of one size pointed to at one offset are a population (fixed-offset)") {
  for (const int nodes : {7, 12}) {
    // An intrusive list: each node's word 1 (8 bytes in) is its link, pointing 8 bytes into the next
    // node; the head is a root. Block `nodes` is pointed to only 16 bytes in, a stray pointer.
    SmallHeap f(nodes + 1);
    f.image.put(SmallHeap::user(nodes), 0x4141414141414141);
    f.anchor(0, 0, 8);
    for (int i = 0; i + 1 < nodes; ++i) f.link(i, i + 1, 1, 8);
    f.anchor(nodes, 1, 16);
    const LeakVerdicts v = verdicts(f, idiom_bit(Idiom::fixed_offset));
    for (int i = 0; i < nodes; ++i) {
      INFO("nodes " << nodes << ", block " << i);
      CHECK(v.verdict[i] == Verdict::reachable);
      CHECK(static_cast<bool>(v.possibly[i]) == (nodes < static_cast<int>(kPopulationQuorum)));
      CHECK(held(v, i) == (nodes < static_cast<int>(kPopulationQuorum) ? 0 : held_by(Idiom::fixed_offset, 8)));
    }
    CHECK(v.possibly[nodes]);  // one pointer at its offset into a block of its size: no population
    CHECK(held_offset(held_by(Idiom::fixed_offset, 8)) == 8);
  }
}

TEST_CASE("verdicts: a population counts the pointers of unreached blocks too, not what they hold") {
  // Blocks 0-9 form a list through +8 that no root reaches (a leaked list); block 10 is held by a root
  // 8 bytes in. The leaked list makes +8 into 24-byte blocks the program's idiom, so block 10 is reachable
  // through it; the list itself stays leaked.
  SmallHeap f(11);
  for (int i = 0; i < 9; ++i) f.link(i, i + 1, 1, 8);
  f.anchor(10, 0, 8);
  const LeakVerdicts v = verdicts(f, kAllIdioms);
  CHECK(v.verdict[10] == Verdict::reachable);
  CHECK(held(v, 10) == held_by(Idiom::fixed_offset, 8));
  CHECK(v.verdict[0] == Verdict::direct_leak);
  for (int i = 1; i < 10; ++i) CHECK(v.verdict[i] == Verdict::indirect_leak);
}

TEST_CASE("verdicts: a block pointed into at many word offsets is a pool") {
  // Blocks 0-9 (24 bytes each) hold pointers into block 10, a 1 KiB pool, at slot boundaries (24 + 48 i);
  // in the second heap at offsets 4 bytes apart, only 5 of them whole words (a parser's pointers into its
  // text are no pool); in the third, 7 blocks point at 7 slots, one short of a population. A root holds the
  // pointers' blocks.
  struct Case {
    std::uint64_t stride;
    int pointers;
    bool pool;
  };
  for (const Case c : {Case{48, 10, true}, Case{4, 10, false}, Case{48, 7, false}}) {
    SmallHeap f(11);
    f.heap.blocks[10].size_units = 64;  // the last block: 1024 bytes, past every other
    for (int i = 0; i < c.pointers; ++i) {
      f.anchor(i, i);
      f.image.put(SmallHeap::user(i), SmallHeap::user(10) + 24 + c.stride * i);
    }
    const LeakVerdicts v = verdicts(f, idiom_bit(Idiom::pool));
    INFO("stride " << c.stride << ", pointers " << c.pointers);
    CHECK(v.verdict[10] == Verdict::reachable);
    CHECK(static_cast<bool>(v.possibly[10]) == !c.pool);
    CHECK(held(v, 10) == (c.pool ? held_by(Idiom::pool, 0) : 0));
  }
}

TEST_CASE("idioms: memcheck names valgrind's default set, and heapscope's own are named") {
  std::string error;
  CHECK(parse_idioms("memcheck", &error) == kMemcheckIdioms);
  CHECK(parse_idioms("memcheck,pool", &error) == (kMemcheckIdioms | idiom_bit(Idiom::pool)));
  CHECK(parse_idioms("fixed-offset,pool", &error) == (idiom_bit(Idiom::fixed_offset) | idiom_bit(Idiom::pool)));
  CHECK(kAllIdioms == (kMemcheckIdioms | kPopulationIdioms));
  CHECK(idiom_name(Idiom::fixed_offset) == "fixed-offset");
}

TEST_CASE("verdicts: pointers into reached blocks, and a block's into itself, make no population") {
  SECTION("a block's own pointers into itself are no pool") {
    // Block 10, 1 KiB, points into itself at ten word offsets (list heads pointing at themselves); a root
    // points 24 bytes into it: one pointer from outside, no population.
    SmallHeap f(11);
    f.heap.blocks[10].size_units = 64;
    for (int i = 0; i < 10; ++i) f.image.put(SmallHeap::user(10) + 64 + 16 * i, SmallHeap::user(10) + 64 + 16 * i);
    f.anchor(10, 0, 24);
    const LeakVerdicts v = verdicts(f, kAllIdioms);
    CHECK(v.verdict[10] == Verdict::reachable);
    CHECK(v.possibly[10]);
  }
  SECTION("blocks a start pointer reaches count for no fixed-offset population") {
    // Blocks 0-8 are held from their starts by roots and pointed to 8 bytes in by block 10 (held too);
    // block 9 only 8 bytes in: the shape's only unreached member.
    SmallHeap f(11);
    f.heap.blocks[10].size_units = 10;  // 160 bytes: room for ten pointers
    f.anchor(10, 0);
    for (int i = 0; i < 9; ++i) f.anchor(i, i + 1);
    for (int i = 0; i < 10; ++i) f.image.put(SmallHeap::user(10) + 8 * i, SmallHeap::user(i) + 8);
    const LeakVerdicts v = verdicts(f, kAllIdioms);
    CHECK(v.verdict[9] == Verdict::reachable);
    CHECK(v.possibly[9]);
  }
}
