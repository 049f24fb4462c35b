// The musl walker (runtime/musl) on a hand-made mallocng heap in a fake image: one meta area describing a
// mapped group of five 48-byte slots — one available, one freed, one in use at its start, one in use one unit
// into its slot (the offset marker), one holding a nested group of two 16-byte slots — and an individually
// mmapped allocation. Each slot gets its state and its block starts at its in-band header; the requested
// bytes are read from the reserved bytes; damage (a group that does not point back at its meta, a slot header
// that does not name its slot) gives findings and a partial model, never a crash.
#include <catch2/catch.hpp>

#include <array>

#include "fake_image.h"
#include "runtime/musl/musl_heap.h"
#include "runtime/musl/musl_runtime.h"

using namespace heapscope;
using namespace heapscope::musl;
using heapscope::testing::FakeImage;

namespace {

constexpr std::uint64_t kSecret = 0x5ec7e75ec7e7ull;
constexpr Address kArea = 0x10000;
constexpr Address kGroup = 0x200000;            // five slots of 48 bytes (class 2), in a page of its own
constexpr Address kStorage = kGroup + 16;
constexpr std::uint64_t kStride = 48;
constexpr Address kNested = kStorage + 4 * kStride;  // slot 4 holds a group of two 16-byte slots (class 0)
constexpr Address kMapped = 0x300000;           // an individual mapping of two pages (class 63)
constexpr std::uint64_t kMappedRequest = 5000;

Address slot(std::uint64_t i) { return kStorage + i * kStride; }
Address meta(std::uint64_t k) { return kArea + 24 + 40 * k; }
std::uint64_t meta_bits(unsigned last_idx, bool freeable, unsigned sizeclass, std::uint64_t maplen) {
  return last_idx | (std::uint64_t{freeable} << 5) | (std::uint64_t{sizeclass} << 6) | (maplen << 12);
}

struct Heap {
  FakeImage image;
  Runtime rt;

  // Writes `bytes` at `at`, leaving the bytes around them as they are.
  void poke(Address at, std::initializer_list<std::uint8_t> bytes) {
    std::uint8_t word[8];
    REQUIRE(image.read(at, word, 8) == 8);
    std::size_t i = 0;
    for (std::uint8_t b : bytes) word[i++] = b;
    std::uint64_t v;
    std::memcpy(&v, word, 8);
    image.put(at, v);
  }
  // An in-band header before `object`: slot index, reserved code, offset in units from `storage`.
  void header(Address object, Address storage, unsigned index, unsigned reserved) {
    const std::uint64_t units = (object - storage) / 16;
    poke(object - 4, {0, static_cast<std::uint8_t>(index | (reserved << 5)), static_cast<std::uint8_t>(units),
                      static_cast<std::uint8_t>(units >> 8)});
  }
  void put_meta(std::uint64_t k, Address mem, std::uint32_t avail, std::uint32_t freed, std::uint64_t bits) {
    image.put(meta(k) + 16, mem);
    image.put(meta(k) + 24, avail | (std::uint64_t{freed} << 32));
    image.put(meta(k) + 32, bits);
    image.put(mem, meta(k));  // the group's header points back
  }

  Heap() {
    image.add_region(kArea, 4096);
    image.add_region(kGroup, 4096);
    image.add_region(kMapped, 2 * 4096);
    image.put(kArea, kSecret);
    image.put(kArea + 16, MetaAreaLayout::kSlots);
    // The mapped group: slot 1 available, slot 3 freed; 0, 2 and 4 in use.
    put_meta(0, kGroup, 0b00010, 0b01000, meta_bits(4, true, 2, 1));
    header(slot(0), kStorage, 0, 2);  // 42 of its 44 bytes asked for
    // Slot 2's object lies one unit in: the offset marker at the slot's start, the header before the object.
    poke(slot(2) - 4, {0, 7 << 5, 1, 0});
    header(slot(2) + 16, kStorage, 2, 0);  // all of its 28 bytes asked for
    // Slot 4 holds a group of class 0 (reserved code 6), of which slot 0 is in use, slot 1 available.
    header(kNested, kStorage, 4, 6);
    put_meta(1, kNested, 0b10, 0, meta_bits(1, true, 0, 0));
    image.put(kNested + 16 + 12 - 4, 5);  // reserved 5, counted at the room's end: 7 of 12 bytes asked for
    header(kNested + 16, kNested + 16, 0, 5);
    // The individual mapping: one slot of two pages less the group header.
    put_meta(2, kMapped, 0, 0, meta_bits(0, true, kMmapClass, 2));
    const Address end = kMapped + 2 * 4096 - 4;
    image.put(end - 4, (end - (kMapped + 16)) - kMappedRequest);
    header(kMapped + 16, kMapped + 16, 0, 5);
    rt.secret = kSecret;
    rt.areas = {kArea};
  }

  const Block* at(const HeapModel& m, Address chunk) {
    for (const Block& b : m.blocks)
      if (b.chunk == chunk) return &b;
    return nullptr;
  }
};

}  // namespace

TEST_CASE("musl walk: slots take their state from the masks and start at their in-band header", "[musl]") {
  Heap h;
  const HeapModel m = walk_heap(h.image, h.rt);
  CHECK(m.complete);
  CHECK(m.warnings.empty());
  REQUIRE(m.blocks.size() == 7);
  for (const Block& b : m.blocks) CHECK(b.is_inband());
  const Block* first = h.at(m, slot(0) - 4);
  REQUIRE(first);
  CHECK(first->state == BlockState::in_use);
  CHECK(first->address() == slot(0));
  CHECK(first->usable_size() == 44);
  CHECK(h.at(m, slot(1) - 4)->state == BlockState::free);
  const Block* offset = h.at(m, slot(2) + 12);  // the object one unit into its slot
  REQUIRE(offset);
  CHECK(offset->state == BlockState::in_use);
  CHECK(offset->usable_size() == 28);
  CHECK(h.at(m, slot(3) - 4)->state == BlockState::free);
  CHECK(h.at(m, slot(4) - 4) == nullptr);  // the nested group's slot is no block; its slots are
  CHECK(h.at(m, kNested + 12)->state == BlockState::in_use);
  CHECK(h.at(m, kNested + 12)->usable_size() == 12);
  CHECK(h.at(m, kNested + 28)->state == BlockState::free);
  const Block* mapped = h.at(m, kMapped + 12);
  REQUIRE(mapped);
  CHECK(mapped->state == BlockState::mmapped);
  CHECK(mapped->arena == Block::kNoArena);
  CHECK(mapped->usable_size() >= kMappedRequest);
  CHECK(m.mmapped_total.bytes == 2 * 4096);

  // One arena: the mapped group's page, its blocks and overhead tiling it.
  REQUIRE(m.arenas.size() == 1);
  const ArenaInfo& a = m.arenas[0];
  CHECK(a.system_bytes == 4096);
  std::uint64_t bytes = a.overhead_bytes;
  for (const StateTotal& t : a.totals) bytes += t.bytes;
  CHECK(bytes == a.system_bytes);

  std::optional<std::uint64_t> requested;
  for (const AllocatorFigure& f : m.figures)
    if (f.name == "requested bytes") requested = f.own;
  CHECK(requested == 42 + 28 + 7 + kMappedRequest);

  const HeapVerification v = verify_heap(h.image, h.rt);
  CHECK(v.findings.empty());
  CHECK(v.checked.heaps == 3);
  CHECK(v.checked.chunks == 7);
}

TEST_CASE("musl walk: a group that does not point back at its meta is a finding and is left out", "[musl]") {
  Heap h;
  h.image.put(kGroup, meta(2));  // names another meta
  const HeapModel m = walk_heap(h.image, h.rt);
  CHECK_FALSE(m.complete);
  CHECK_FALSE(m.warnings.empty());
  CHECK(h.at(m, slot(0) - 4) == nullptr);
  CHECK(h.at(m, kMapped + 12) != nullptr);  // the other groups are walked
  const HeapVerification v = verify_heap(h.image, h.rt);
  bool group = false, nested = false;
  for (const HeapFinding& f : v.findings) {
    group = group || (f.kind == "group" && f.chunk == kGroup);
    nested = nested || f.kind == "nested_group";  // its nested group is in no walked slot now
  }
  CHECK(group);
  CHECK(nested);
}

TEST_CASE("musl walk: a slot header that does not name its slot is a finding, and the block starts at the slot", "[musl]") {
  Heap h;
  h.header(slot(0), kStorage, 3, 2);  // says slot 3
  const HeapModel m = walk_heap(h.image, h.rt);
  CHECK_FALSE(m.complete);
  const Block* b = h.at(m, slot(0) - 4);
  REQUIRE(b);
  CHECK(b->state == BlockState::in_use);
  const HeapVerification v = verify_heap(h.image, h.rt);
  REQUIRE(v.findings.size() == 1);
  CHECK(v.findings[0].kind == "slot_header");
}

TEST_CASE("musl walk: masks and classes that do not fit mallocng are findings, not a walk of garbage", "[musl]") {
  Heap h;
  h.put_meta(0, kGroup, 0b00011, 0b00010, meta_bits(4, true, 2, 1));  // a slot both available and freed
  h.image.put(meta(2) + 32, meta_bits(0, true, 50, 2));                 // no class 50
  const HeapModel m = walk_heap(h.image, h.rt);
  CHECK_FALSE(m.complete);
  CHECK(m.blocks.empty());
  const HeapVerification v = verify_heap(h.image, h.rt);
  std::size_t metas = 0;
  for (const HeapFinding& f : v.findings) metas += f.kind == "meta";
  CHECK(metas == 2);
}
