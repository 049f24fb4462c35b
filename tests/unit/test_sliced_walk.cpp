// The glibc walk of one big heap cut into slices walked at once (runtime/glibc/sliced_walk.h): whatever the
// slices' guesses of where a chunk starts, the joined walk is the serial walk, block for block.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "fake_image.h"
#include "runtime/glibc/sliced_walk.h"

using namespace heapscope;
using namespace heapscope::glibc;
using heapscope::testing::FakeImage;

namespace {

constexpr Address kHeap = 0x555555559000;
constexpr std::uint64_t kHeapBytes = 1 << 20;

// A heap of chunks of 32..1024 bytes, one in five free; payloads hold, every so often, bytes that look like
// a run of chunk headers (a size of 0x20 with PREV_INUSE, again and again), to mislead the slices' guesses.
struct FakeHeap {
  FakeImage image;
  Address end = kHeap + kHeapBytes;
  Address top = 0;

  explicit FakeHeap(bool decoys) {
    image.add_region(kHeap, kHeapBytes);
    std::uint64_t random = 0x9e3779b97f4a7c15u;
    Address c = kHeap;
    std::uint64_t previous_size = 0;
    bool previous_free = false;
    while (c + 0x1000 < end) {
      random ^= random << 13, random ^= random >> 7, random ^= random << 17;
      const std::uint64_t size = 0x20 + (random % 63) * 0x10;
      const bool free = !previous_free && random % 5 == 0;  // glibc never leaves two free chunks side by side
      image.chunk(c, size | (previous_free ? 0 : kPrevInUse), previous_free ? previous_size : 0);
      if (decoys && !free && size >= 0x200)
        for (Address d = c + 0x10; d + 0x20 <= c + size; d += 0x20) image.put(d + 8, 0x20 | kPrevInUse);
      previous_size = size;
      previous_free = free;
      c += size;
    }
    top = c;
    image.chunk(top, (end - top) | (previous_free ? 0 : kPrevInUse), previous_free ? previous_size : 0);
  }
};

std::vector<Block> serial_walk(FakeHeap& heap) {
  std::vector<Block> blocks(max_chunks(kHeap, heap.end));
  BlockSink sink{blocks.data(), blocks.size(), 0};
  MemoryCursor mem(heap.image);
  const SegmentWalk walked = walk_segment(mem, kHeap, heap.end, heap.top, 0, sink);
  REQUIRE(walked.reached_end);
  blocks.resize(sink.count);
  return blocks;
}

struct Joined {
  std::vector<Block> blocks;
  SegmentWalk result;
  std::size_t guesses_met = 0;  // slices whose guessed start was met by the true walk after some chunks
};

Joined sliced_walk(FakeHeap& heap, unsigned workers, std::uint64_t slice_bytes) {
  const std::vector<HeapSlice> cut = slices_of(kHeap, heap.end, workers, slice_bytes);
  std::vector<std::vector<Block>> buffers;
  std::vector<SliceWalk> walks;
  for (const HeapSlice& slice : cut) {
    buffers.emplace_back(max_chunks(slice.start, slice.limit ? slice.limit : heap.end));
    walks.push_back({slice, {buffers.back().data(), buffers.back().size(), 0}, {}, 0});
  }
  MemoryCursor mem(heap.image);
  std::vector<SliceWalk*> pointers;
  for (std::size_t i = 0; i < walks.size(); ++i) {
    walk_slice(mem, walks[i], i, heap.end, heap.top, 0);
    pointers.push_back(&walks[i]);
  }
  Joined joined;
  joined.result = join_slices(mem, pointers, heap.end, heap.top, 0);
  for (const SliceWalk& w : walks) {
    joined.blocks.insert(joined.blocks.end(), w.sink.data + w.skip, w.sink.data + w.sink.count);
    joined.guesses_met += w.skip > 0;
  }
  return joined;
}

bool same_blocks(const std::vector<Block>& a, const std::vector<Block>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].chunk != b[i].chunk || a[i].chunk_size() != b[i].chunk_size() || a[i].state != b[i].state) return false;
  return true;
}

}  // namespace

TEST_CASE("sliced walk: a small heap or one core is one slice") {
  CHECK(slices_of(kHeap, kHeap + (40 << 20), 2).size() == 1);
  CHECK(slices_of(kHeap, kHeap + (1ull << 30), 1).size() == 1);
  const auto slices = slices_of(kHeap, kHeap + (1ull << 30), 2);
  REQUIRE(slices.size() == 8);
  CHECK(slices.front().start == kHeap);
  CHECK(slices.back().limit == 0);
  for (std::size_t i = 1; i < slices.size(); ++i) CHECK(slices[i - 1].limit == slices[i].start);
}

TEST_CASE("sliced walk: the joined slices are the serial walk, block for block") {
  const bool decoys = GENERATE(false, true);
  FakeHeap heap(decoys);
  const std::vector<Block> serial = serial_walk(heap);
  std::size_t guesses_met = 0;
  for (const std::uint64_t slice_bytes : {std::uint64_t{64} << 10, std::uint64_t{16} << 10, std::uint64_t{4} << 10}) {
    const Joined joined = sliced_walk(heap, 4, slice_bytes);
    guesses_met += joined.guesses_met;
    INFO("decoys " << decoys << ", slices of " << slice_bytes << " bytes");
    CHECK(same_blocks(joined.blocks, serial));
    CHECK(joined.result.reached_end);
    CHECK(joined.result.warnings.empty());
    CHECK(joined.result.blocks == serial.size());
    StateTotals counted{};
    for (const Block& b : serial) counted[static_cast<int>(b.state)].add(b.chunk_size());
    for (int s = 0; s < kBlockStateCount; ++s) {
      CHECK(joined.result.totals[s].blocks == counted[s].blocks);
      CHECK(joined.result.totals[s].bytes == counted[s].bytes);
    }
  }
  // Decoys send some guesses into payloads; those that run back into the true chain are met there.
  if (decoys) CHECK(guesses_met > 0);
}

TEST_CASE("sliced walk: damage in a middle slice stops the joined walk there, as it stops the serial one") {
  FakeHeap heap(false);
  std::vector<Block> serial = serial_walk(heap);
  const Block& victim = serial[serial.size() / 2];
  heap.image.put(victim.chunk + 8, 0x4141414141414141);
  std::vector<Block> blocks(max_chunks(kHeap, heap.end));
  BlockSink sink{blocks.data(), blocks.size(), 0};
  MemoryCursor mem(heap.image);
  const SegmentWalk damaged = walk_segment(mem, kHeap, heap.end, heap.top, 0, sink);
  blocks.resize(sink.count);
  const Joined joined = sliced_walk(heap, 4, std::uint64_t{16} << 10);
  CHECK(same_blocks(joined.blocks, blocks));
  CHECK_FALSE(joined.result.reached_end);
  CHECK(joined.result.stopped_at == damaged.stopped_at);
  CHECK(joined.result.warnings == damaged.warnings);
}
