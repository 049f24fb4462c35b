// The reader of heapscope's allocation-site recorder table (runtime/glibc/sites_recorder.h) on tables laid
// out in a FakeImage exactly as recorder/heapscope_sites.c lays them out: found by the magic, read with every
// index checked. The recorder itself, in real processes, is tested end to end (tests/e2e/test_sites_recorder.py).
#include <catch2/catch.hpp>

#include <cstring>

#include "fake_image.h"
#include "recorder/sites_table.h"
#include "runtime/glibc/sites_recorder.h"

using namespace heapscope;
using heapscope::testing::FakeImage;

namespace {

constexpr Address kTable = 0x7f0000000000;
constexpr std::uint64_t kSampleSlots = 16, kStackSlots = 8;

// A table with room for kSampleSlots samples and kStackSlots stacks, at kTable.
struct TableBuilder {
  FakeImage image;
  hs_sites_header header{};

  TableBuilder() {
    std::memcpy(header.magic, HS_SITES_MAGIC, sizeof header.magic);
    header.version = HS_SITES_VERSION;
    header.header_bytes = sizeof header;
    header.mean_interval = 1;
    header.sample_slots = kSampleSlots;
    header.stack_slots = kStackSlots;
    header.filter_bytes = 8;
    header.samples_offset = 192;
    header.stacks_offset = header.samples_offset + kSampleSlots * sizeof(hs_sites_sample);
    header.filter_offset = header.stacks_offset + kStackSlots * sizeof(hs_sites_stack);
    header.mapping_bytes = (header.filter_offset + 8 + 4095) & ~std::uint64_t{4095};
    header.start_time_ns = 1'000'000'000;
    header.max_frames = HS_SITES_MAX_FRAMES;
    image.add_region(kTable, header.mapping_bytes);
  }
  void stack(std::uint32_t slot, std::vector<std::uint64_t> frames) {
    hs_sites_stack s{};
    s.hash = 0x1234 + slot;
    s.depth = static_cast<std::uint32_t>(frames.size());
    std::copy(frames.begin(), frames.end(), s.frames);
    write(kTable + header.stacks_offset + slot * sizeof s, s);
    ++header.stacks_used;
  }
  void sample(std::uint32_t slot, Address block, std::uint64_t requested, std::uint32_t stack) {
    write(kTable + header.samples_offset + slot * sizeof(hs_sites_sample),
          hs_sites_sample{~block, requested, 500, stack, 77});
    ++header.samples_live;
    ++header.samples_taken;
  }
  template <class T>
  void write(Address at, const T& value) {
    std::vector<std::byte> bytes = image.bytes_of(kTable);
    std::memcpy(bytes.data() + (at - kTable), &value, sizeof value);
    image.fill(kTable, bytes);
  }
  AllocationSamples read() {
    write(kTable, header);
    return read_sites_recorder(image);
  }
};

}  // namespace

TEST_CASE("sites recorder: samples and their stacks are read from the table the magic marks") {
  TableBuilder t;
  t.image.add_region(0x600000, 0x1000);  // another anonymous mapping, without the magic
  t.stack(3, {0x401000, 0x402000, 0x403000});
  t.stack(5, {0x404000});
  t.sample(9, 0x5000, 24, 3);
  t.sample(1, 0x7000, 100, 5);
  t.sample(2, 0x6000, 32, 3);
  const AllocationSamples s = t.read();
  CHECK(s.supported);
  CHECK(s.enabled == true);
  CHECK(s.mean_interval == 1);
  CHECK(s.warnings.empty());
  REQUIRE(s.samples.size() == 3);
  CHECK(s.samples[0].block == 0x5000);  // in address order
  CHECK(s.samples[1].block == 0x6000);
  CHECK(s.samples[2].block == 0x7000);
  CHECK(s.samples[0].requested == 24);
  CHECK(s.samples[0].time_ns == 1'000'000'500);
  REQUIRE(s.stacks.size() == 2);  // each stack once, however many samples share it
  CHECK(s.samples[0].stack == s.samples[1].stack);
  CHECK(s.stacks[s.samples[0].stack] == std::vector<Address>{0x401000, 0x402000, 0x403000});
  CHECK(s.stacks[s.samples[2].stack] == std::vector<Address>{0x404000});
}

TEST_CASE("sites recorder: a sample whose stack is out of bounds or empty is left out and counted") {
  TableBuilder t;
  t.stack(0, {0x401000});
  t.sample(0, 0x5000, 8, 0);
  t.sample(1, 0x6000, 8, 6);                   // an empty slot
  t.sample(2, 0x7000, 8, kStackSlots + 3);     // past the set
  t.sample(3, 0x8000, 8, HS_SITES_NO_STACK);  // kept without a stack: the recorder counted it
  t.header.stacks_dropped = 1;
  const AllocationSamples s = t.read();
  REQUIRE(s.samples.size() == 1);
  CHECK(s.samples[0].block == 0x5000);
  REQUIRE(s.warnings.size() == 2);
  CHECK_THAT(s.warnings[0], Catch::Contains("sampled blocks without a stack: 1"));
  CHECK_THAT(s.warnings[1], Catch::Contains("name no readable stack: 2"));
}

TEST_CASE("sites recorder: a full table says how many samples it dropped") {
  TableBuilder t;
  t.header.samples_dropped = 40;
  t.header.samples_taken = 100;
  const AllocationSamples s = t.read();
  REQUIRE(s.warnings.size() == 1);
  CHECK_THAT(s.warnings[0], Catch::Contains("40 of 100 samples were dropped"));
}

TEST_CASE("sites recorder: a table of another version or with offsets that disagree is not read") {
  TableBuilder t;
  t.stack(0, {0x401000});
  t.sample(0, 0x5000, 8, 0);
  SECTION("version") {
    t.header.version = HS_SITES_VERSION + 1;
    const AllocationSamples s = t.read();
    CHECK(s.samples.empty());
    REQUIRE(s.warnings.size() == 1);
    CHECK_THAT(s.warnings[0], Catch::Contains("its version is 2"));
  }
  SECTION("offsets") {
    t.header.stacks_offset = t.header.samples_offset + 8;  // inside the samples
    const AllocationSamples s = t.read();
    CHECK(s.samples.empty());
    REQUIRE(s.warnings.size() == 1);
    CHECK_THAT(s.warnings[0], Catch::Contains("do not agree"));
  }
  SECTION("a slot count whose size wraps around") {
    t.header.sample_slots = std::uint64_t{1} << 62;
    const AllocationSamples s = t.read();
    CHECK(s.samples.empty());
    REQUIRE(s.warnings.size() == 1);
    CHECK_THAT(s.warnings[0], Catch::Contains("do not agree"));
  }
  SECTION("sample slots not a power of two") {
    t.header.sample_slots = 15;
    CHECK(t.read().samples.empty());
  }
}

TEST_CASE("sites recorder: without a table, the recorder's library alone says sampling is on") {
  FakeImage image;
  image.add_region(0x600000, 0x1000);
  AllocationSamples s = read_sites_recorder(image);
  CHECK(s.supported);
  CHECK(s.enabled == false);
  CHECK_THAT(s.how_to_enable, Catch::Contains("heapscope record"));
  image.add_code(0x7f1000000000, 0x1000, "/usr/local/lib/heapscope/libheapscope_sites.so");
  s = read_sites_recorder(image);
  CHECK(s.enabled == true);
  CHECK(s.samples.empty());
}
