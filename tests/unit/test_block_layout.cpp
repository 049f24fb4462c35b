// Block's two layouts (heap/block.h): glibc's chunks (a 16-byte header, sizes in 16-byte units, the next
// chunk's prev_size word usable) and headerless blocks (tcmalloc's objects and spans: the block is the
// object, sizes in 8-byte units). Both fit 16 bytes; address, chunk size, usable size, containment and
// the block index agree with each allocator's rules, and so do snapshots and a whole leak report over a
// heap of headerless blocks.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include "commands/command_line.h"
#include "fake_image.h"
#include "heap/heap_model.h"
#include "model/block_index.h"
#include "runtime/allocator.h"
#include "session/session.h"
#include "session/snapshot_store.h"
#include "toy_session.h"

using namespace heapscope;
using heapscope::testing::FakeImage;

namespace {

Block glibc_chunk(Address chunk, std::uint64_t bytes, BlockState state) {
  Block b;
  b.chunk = chunk;
  b.size_units = static_cast<std::uint32_t>(bytes / 16);
  b.state = state;
  return b;
}

}  // namespace

TEST_CASE("block layout: glibc chunks keep their header, 16-byte units and the next chunk's prev_size") {
  STATIC_REQUIRE(sizeof(Block) == 16);
  const Block in_use = glibc_chunk(0x1000, 48, BlockState::in_use);
  CHECK(in_use.layout == BlockLayout::glibc_chunk);  // the default: every glibc walker's block
  CHECK(in_use.header_bytes() == 16);
  CHECK(in_use.address() == 0x1010);
  CHECK(in_use.chunk_size() == 48);
  CHECK(in_use.chunk_end() == 0x1030);
  CHECK(in_use.usable_size() == 40);
  CHECK(in_use.user_end() == 0x1038);  // into the next chunk's prev_size
  const Block mmapped = glibc_chunk(0x10000, 0x2000, BlockState::mmapped);
  CHECK(mmapped.usable_size() == 0x2000 - 16);
  CHECK(mmapped.user_end() == mmapped.chunk_end());
}

TEST_CASE("block layout: headerless blocks are their objects, in 8-byte units") {
  const Block small = Block::bare(0x2000, 8, BlockState::in_use, 0);
  CHECK(small.layout == BlockLayout::bare);
  CHECK(small.header_bytes() == 0);
  CHECK(small.address() == 0x2000);
  CHECK(small.chunk_size() == 8);
  CHECK(small.usable_size() == 8);
  CHECK(small.chunk_end() == 0x2008);
  CHECK(small.user_end() == 0x2008);
  const Block odd = Block::bare(0x3000, 24, BlockState::tcache, 0);
  CHECK(odd.chunk_size() == 24);
  CHECK(odd.usable_size() == 24);
  CHECK(odd.state == BlockState::tcache);
  // A large span: many pages, still one block; the largest a Block holds is just under 32 GiB.
  const Block span = Block::bare(0x7f0000000000, 3 * 1024 * 1024 + 8192, BlockState::in_use, 0);
  CHECK(span.chunk_size() == 3 * 1024 * 1024 + 8192);
  const Block biggest = Block::bare(0x100000, Block::kMaxBareBytes, BlockState::free, 0);
  CHECK(biggest.chunk_size() == Block::kMaxBareBytes);
  CHECK(Block::kMaxBareBytes == (std::uint64_t{0xffffffff} * 8));
}

TEST_CASE("block layout: musl's slots start at their 4-byte in-band header, in 16-byte units") {
  // A 48-byte slot whose object lies one unit into it: the block runs from the header before the object to
  // the next slot's header.
  const Block slot = Block::inband(0x4000c, 32, BlockState::in_use, 0);
  CHECK(slot.layout == BlockLayout::inband);
  CHECK(slot.header_bytes() == 4);
  CHECK(slot.address() == 0x40010);
  CHECK(slot.chunk_size() == 32);
  CHECK(slot.usable_size() == 28);
  CHECK(slot.user_end() == slot.chunk_end());
  const Block mapped = Block::inband(0x7f000000001c, 0x3ff0, BlockState::mmapped, Block::kNoArena);
  CHECK(mapped.usable_size() == 0x3ff0 - 4);  // no glibc mmapped-chunk header
  const SnapshotBlock kept = snapshot_block(slot, 3);
  CHECK(kept.inband());
  CHECK(!kept.bare());
  CHECK(kept.type() == 3);
  CHECK(kept.address == slot.address());
  CHECK(kept.usable_size() == slot.usable_size());
}

TEST_CASE("block layout: containment and the block index follow each layout") {
  HeapModel heap;
  // Headerless objects of 8 and 24 bytes packed one after another, then a glibc chunk after a gap.
  heap.blocks.push_back(Block::bare(0x10000, 8, BlockState::in_use, 0));
  heap.blocks.push_back(Block::bare(0x10008, 8, BlockState::free, 0));
  heap.blocks.push_back(Block::bare(0x10010, 24, BlockState::in_use, 0));
  heap.blocks.push_back(glibc_chunk(0x20000, 32, BlockState::in_use));
  ArenaInfo arena;
  arena.heaps.push_back({0x10000, 0x10028});
  arena.heaps.push_back({0x20000, 0x20020});
  heap.arenas.push_back(arena);

  CHECK(heap.block_containing(0x10000) == &heap.blocks[0]);
  CHECK(heap.block_containing(0x10007) == &heap.blocks[0]);
  CHECK(heap.block_containing(0x10008) == &heap.blocks[1]);
  CHECK(heap.block_containing(0x10027) == &heap.blocks[2]);
  CHECK(heap.block_containing(0x10028) == nullptr);
  CHECK(heap.block_containing(0x20000) == &heap.blocks[3]);  // a glibc chunk's header is part of it

  const BlockIndex index(heap);
  CHECK(index.find(0x10000) == 0);       // a headerless object's first byte is its address
  CHECK(index.find(0x10007) == 0);
  CHECK(index.find(0x10008) == kNoBlock);  // the free object between them
  CHECK(index.find(0x10010) == 2);
  CHECK(index.find(0x10027) == 2);
  CHECK(index.find(0x10028) == kNoBlock);
  CHECK(index.find(0x20000) == kNoBlock);  // glibc's header is not user memory
  CHECK(index.find(0x20010) == 3);
  CHECK(index.find(0x20027) == 3);        // the next chunk's prev_size word is usable
}

TEST_CASE("block layout: snapshots keep a headerless block's size") {
  const Block bare = Block::bare(0x5000, 24, BlockState::in_use, 0);
  const SnapshotBlock s = snapshot_block(bare, 3);
  CHECK(s.address == 0x5000);
  CHECK(s.type() == 3);
  CHECK(s.usable_size() == 24);
  CHECK(s.chunk_size() == 24);
  CHECK_FALSE(s.mmapped());
  const SnapshotBlock g = snapshot_block(glibc_chunk(0x6000, 48, BlockState::in_use), 2);
  CHECK(g.address == 0x6010);
  CHECK(g.usable_size() == 40);
  CHECK(g.type() == 2);
  const SnapshotBlock m = snapshot_block(glibc_chunk(0x10000, 0x2000, BlockState::mmapped), 1);
  CHECK(m.mmapped());
  CHECK(m.usable_size() == 0x2000 - 16);
  CHECK(m.type() == 1);
}

namespace {

// A headerless toy allocator: a table of object sizes at kTable (bit 0: free), the objects packed from
// kObjects on. Object 0 is held by a global and points to object 1; object 2 (24 bytes) points to object 3
// (8 bytes) and nothing points to it; object 4 is free.
constexpr Address kTable = 0x7e0000000000;
constexpr Address kObjects = 0x7e0000001000;
constexpr Address kGlobals = 0x555555550000;
constexpr std::uint64_t kSizes[] = {16, 8, 24, 8, 16 | 1};

class BareToy final : public LocatedAllocator {
 public:
  explicit BareToy(const Image& image) : image_(image) {}
  std::string name() const override { return "bare toy"; }
  std::optional<HeapModel> walk(std::string*) const override {
    HeapModel model;
    model.allocator = "bare toy";
    Address at = kObjects;
    for (std::size_t i = 0; i < std::size(kSizes); ++i) {
      const std::uint64_t word = image_.read_u64(kTable + 8 * i).value_or(0);
      model.blocks.push_back(Block::bare(at, word & ~1ull, word & 1 ? BlockState::free : BlockState::in_use, 0));
      at += word & ~1ull;
    }
    ArenaInfo arena;
    arena.heaps.push_back({kObjects, at});
    model.arenas.push_back(arena);
    return model;
  }

 private:
  const Image& image_;
};

class BareToyPlugin final : public AllocatorPlugin {
 public:
  std::string_view name() const override { return "bare toy"; }
  std::unique_ptr<LocatedAllocator> locate(const Image& image, const SymbolIndex&, const MallocProvider&,
                                           std::string*) const override {
    return std::make_unique<BareToy>(image);
  }
};

Address object(std::size_t i) {
  Address at = kObjects;
  for (std::size_t k = 0; k < i; ++k) at += kSizes[k] & ~1ull;
  return at;
}

}  // namespace

TEST_CASE("block layout: a leak report over headerless blocks counts whole objects") {
  auto image = std::make_shared<FakeImage>();
  image->add_region(kTable, 0x1000);
  image->add_region(kObjects, 0x1000);
  image->add_region(kGlobals, 0x1000);
  for (std::size_t i = 0; i < std::size(kSizes); ++i) image->put(kTable + 8 * i, kSizes[i]);
  image->put(kGlobals, object(0));
  image->put(object(0), object(1));
  image->put(object(2) + 16, object(3));  // the last word of the 24-byte object

  const nlohmann::json leaks = heapscope::testing::command_json(image, BareToyPlugin(), {"leaks"});
  CHECK(leaks["totals"]["blocks"] == 2);
  CHECK(leaks["totals"]["bytes"] == 24 + 8);
  CHECK(leaks["totals"]["direct"]["bytes"] == 24);
  CHECK(leaks["totals"]["indirect"]["bytes"] == 8);
}
