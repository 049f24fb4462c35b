// Naming blocks by their bytes: text, pointer tables, zeros. A heap address is six bytes and two zeros, and
// some addresses' six bytes are all printable; such a block is a pointer, never a "C string".
#include <cstring>
#include <string>

#include <catch2/catch.hpp>

#include "fake_image.h"
#include "types/content_naming.h"

using namespace heapscope;

namespace {

// Four 32-byte chunks in a heap whose addresses read as text: 0x563c4a6b7230 is "0rkJ<V" and two NULs.
struct PrintableAddressHeap {
  static constexpr Address kHeap = 0x563c4a6b7200;
  testing::FakeImage image;
  HeapModel heap;

  PrintableAddressHeap() {
    image.add_region(kHeap, 0x1000);
    for (int i = 0; i < 4; ++i) {
      Block b;
      b.chunk = kHeap + 32 * i;
      b.size_units = 2;
      b.state = BlockState::in_use;
      heap.blocks.push_back(b);
    }
    ArenaInfo arena;
    arena.heaps.push_back({kHeap, kHeap + 0x1000});
    heap.arenas.push_back(arena);
  }
  static Address user(int i) { return kHeap + 32 * i + 16; }
  void write_text(int i, const std::string& text) {
    REQUIRE(text.size() < 24);
    for (std::size_t at = 0; at < 24; at += 8) {
      std::uint64_t word = 0;
      if (at < text.size()) std::memcpy(&word, text.data() + at, std::min<std::size_t>(8, text.size() - at));
      image.put(user(i) + at, word);
    }
  }
  std::string name_of(int i) {
    BlockTypes types;
    types.resize(heap.blocks.size());
    const BlockIndex index(heap);
    const BlockId all[] = {0, 1, 2, 3};
    name_by_content(image, heap, index, all, types);
    const std::uint32_t id = types.type_id(static_cast<BlockId>(i));
    return id == BlockTypes::kUnknown ? "" : types.name_of(id);
  }
};

}  // namespace

TEST_CASE("a block starting with a heap address whose bytes are printable is not text", "[types]") {
  PrintableAddressHeap h;
  REQUIRE(PrintableAddressHeap::user(1) == 0x563c4a6b7230);
  // Block 0 is a list node: next and prev to block 1 (printable bytes), then a small count.
  h.image.put(PrintableAddressHeap::user(0), PrintableAddressHeap::user(1));
  h.image.put(PrintableAddressHeap::user(0) + 8, PrintableAddressHeap::user(1));
  h.image.put(PrintableAddressHeap::user(0) + 16, 4);
  CHECK(h.name_of(0) != "C string");
  CHECK_FALSE(text_preview(h.image, h.heap.blocks[0]).has_value());
}

TEST_CASE("short and long texts are still C strings", "[types]") {
  PrintableAddressHeap h;
  h.write_text(2, "abcdef");  // 0x666564636261: six printable bytes, but no mapping there
  h.write_text(3, "a longer text, too");
  CHECK(h.name_of(2) == "C string");
  CHECK(h.name_of(3) == "C string");
  CHECK(text_preview(h.image, h.heap.blocks[2]) == "abcdef");
}
