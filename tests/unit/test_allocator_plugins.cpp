// The allocator boundary (runtime/allocator.h): a stand-in allocator plug-in over a toy heap in a synthetic
// image runs leaks, retainers and top through the command table with nothing above the heap model knowing
// it; a process whose malloc no plug-in walks gets one clear error; and a session computes each of its
// products once however many commands run (one block index, one located allocator, one thread list).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include <map>
#include <memory>

#include "commands/command_line.h"
#include "fake_image.h"
#include "model/block_index.h"
#include "runtime/allocator.h"
#include "session/session.h"

using namespace heapscope;
using heapscope::testing::FakeImage;

namespace {

// The toy allocator's heap: a region starting with the magic word, then the number of blocks, then one
// word per block: its size, with bit 0 set when it is free. Blocks follow the table, each after a 16-byte
// header, packed.
constexpr Address kToyHeap = 0x7f0000000000;
constexpr Address kGlobals = 0x555555550000;
constexpr std::uint64_t kMagic = 0x3150414548594f54;  // "TOYHEAP1"

class ToyAllocator final : public LocatedAllocator {
 public:
  explicit ToyAllocator(const Image& image) : image_(image) {}
  std::string name() const override { return "toy"; }
  std::optional<HeapModel> walk(std::string*) const override {
    HeapModel model;
    model.allocator = "toy";
    const std::uint64_t count = image_.read_u64(kToyHeap + 8).value_or(0);
    Address chunk = kToyHeap + 16 + 8 * count;
    for (std::uint64_t i = 0; i < count; ++i) {
      const std::uint64_t word = image_.read_u64(kToyHeap + 16 + 8 * i).value_or(0);
      Block b;
      b.chunk = chunk;
      b.size_units = static_cast<std::uint32_t>((word & ~1ull) / 16);
      b.state = word & 1 ? BlockState::free : BlockState::in_use;
      model.blocks.push_back(b);
      chunk += word & ~1ull;
    }
    ArenaInfo arena;
    arena.address = kToyHeap;
    arena.heaps.push_back({kToyHeap, chunk});
    model.arenas.push_back(arena);
    model.metadata.push_back({kToyHeap, kToyHeap + 16 + 8 * count});
    return model;
  }

 private:
  const Image& image_;
};

class ToyPlugin final : public AllocatorPlugin {
 public:
  std::string_view name() const override { return "toy allocator"; }
  std::unique_ptr<LocatedAllocator> locate(const Image& image, const SymbolIndex&, const MallocProvider&,
                                           std::string* why_not) const override {
    if (image.read_u64(kToyHeap) != kMagic) {
      *why_not = "no toy heap";
      return nullptr;
    }
    return std::make_unique<ToyAllocator>(image);
  }
};

// Five 48-byte blocks (32 usable after the 16-byte header): a global points to 0, 0 to 1; 2 points to 3
// and nothing points to 2 (a leak of two blocks); 4 is free.
std::shared_ptr<FakeImage> toy_image() {
  auto image = std::make_shared<FakeImage>();
  image->add_region(kToyHeap, 0x1000);
  image->add_region(kGlobals, 0x1000);
  image->put(kToyHeap, kMagic);
  image->put(kToyHeap + 8, 5);
  for (int i = 0; i < 5; ++i) image->put(kToyHeap + 16 + 8 * i, 48 | (i == 4 ? 1 : 0));
  auto user = [](int i) { return kToyHeap + 16 + 8 * 5 + 48 * i + 16; };
  image->put(kGlobals, user(0));
  image->put(user(0), user(1));
  image->put(user(2), user(3));
  return image;
}

Address toy_user(int i) { return kToyHeap + 16 + 8 * 5 + 48 * i + 16; }

nlohmann::json run_json(Session& s, std::vector<std::string> words) {
  words.push_back("--json");
  const CommandResult r = execute_command_line(s, words);
  INFO(r.error);
  REQUIRE(r.exit_code == 0);
  return nlohmann::json::parse(r.output);
}

}  // namespace

TEST_CASE("allocator plug-ins: a stand-in allocator's heap runs leaks, retainers and top unchanged") {
  const ToyPlugin toy;
  SessionOptions options;
  options.allocators = {&toy};
  Session s(toy_image(), options);

  const nlohmann::json leaks = run_json(s, {"leaks"});
  const std::uint64_t usable = 48 - 8;  // the glibc-shaped Block: an 8-byte header the next chunk can use
  CHECK(leaks["totals"]["blocks"] == 2);
  CHECK(leaks["totals"]["bytes"] == 2 * usable);
  CHECK(leaks["totals"]["direct"]["blocks"] == 1);
  CHECK(leaks["totals"]["indirect"]["blocks"] == 1);

  const nlohmann::json retainers = run_json(s, {"retainers", fmt::format("{:#x}", toy_user(1))});
  REQUIRE(retainers["paths"].size() == 1);
  const nlohmann::json& steps = retainers["paths"][0]["steps"];
  REQUIRE(steps.size() == 2);
  CHECK(steps[0]["address"] == toy_user(0));

  const nlohmann::json top = run_json(s, {"top"});
  REQUIRE_FALSE(top["rows"].empty());
  CHECK(top["rows"][0]["address"] == toy_user(0));
  CHECK(top["rows"][0]["retained_bytes"] == 2 * (48 - 8));
}

TEST_CASE("allocator plug-ins: when no plug-in applies, every command says why") {
  const ToyPlugin toy;
  SessionOptions options;
  options.allocators = {&toy};
  Session s(std::make_shared<FakeImage>(), options);
  for (const char* command : {"summary", "leaks", "top", "verify"}) {
    const CommandResult r = execute_command_line(s, {command});
    INFO(command << ": " << r.output << r.error);
    if (std::string(command) == "summary") {
      CHECK(r.output.find("no toy heap") != std::string::npos);
    } else {
      CHECK(r.exit_code == 1);
      CHECK(r.error.find("no toy heap") != std::string::npos);
    }
  }
}

// A session over the stand-in allocator's heap that counts each product as its computation starts.
struct CountingSession {
  const ToyPlugin toy;
  std::map<std::string, int> computed;
  Session session;
  CountingSession() : session(toy_image(), options()) {}
  SessionOptions options() {
    SessionOptions o;
    o.allocators = {&toy};
    o.on_product = [this](std::string_view name) { ++computed[std::string(name)]; };
    return o;
  }
};

TEST_CASE("session products: each is computed once, whatever the commands") {
  CountingSession counting;
  Session& s = counting.session;
  std::map<std::string, int>& computed = counting.computed;
  const std::uint64_t indexes_before = BlockIndex::built();
  for (const char* command : {"leaks", "top", "roots", "threads", "histogram", "summary"})
    REQUIRE(execute_command_line(s, {command}).exit_code == 0);
  REQUIRE(execute_command_line(s, {"retainers", fmt::format("{:#x}", toy_user(1))}).exit_code == 0);
  CHECK(BlockIndex::built() - indexes_before == 1);
  for (const auto& [name, times] : computed) {
    INFO(name);
    CHECK(times == 1);
  }
  CHECK(computed.count("locate allocator") == 1);
  CHECK(computed.count("libc threads") == 1);
  CHECK(computed.count("block index") == 1);
}

TEST_CASE("session products: allocation sites are read only by the commands that show them") {
  CountingSession counting;
  Session& s = counting.session;
  const std::map<std::string, int>& computed = counting.computed;
  for (const char* command : {"leaks", "top", "roots", "histogram"})
    REQUIRE(execute_command_line(s, {command}).exit_code == 0);
  CHECK(computed.count("provenance") == 0);
  // The stand-in allocator keeps no allocation stacks: the command says so rather than showing an empty table.
  const CommandResult by_site = execute_command_line(s, {"histogram", "--by", "site"});
  CHECK(by_site.exit_code != 0);
  CHECK(by_site.error.find("no allocation sites") != std::string::npos);
  CHECK(computed.count("provenance") == 1);
}

namespace {

// A stand-in collector whose heap lives beside the toy malloc's (AllocatorPlugin::beside_malloc): a region
// starting with its magic word, then three headerless 32-byte objects from +64. Its verify counts the
// arenas and blocks it is given, so that a test sees which part of the model it got.
constexpr Address kCollectorHeap = 0x7e0000000000;
constexpr std::uint64_t kCollectorMagic = 0x31434759584f54;  // "TOYXGC1"

Address collector_object(int i) { return kCollectorHeap + 64 + 32 * i; }

class ToyCollector final : public LocatedAllocator {
 public:
  std::string name() const override { return "toy collector"; }
  std::optional<HeapModel> walk(std::string*) const override {
    HeapModel model;
    model.allocator = "toy collector";
    model.version = "1.0";
    for (int i = 0; i < 3; ++i) model.blocks.push_back(Block::bare(collector_object(i), 32, BlockState::in_use, 0));
    ArenaInfo arena;
    arena.address = kCollectorHeap;
    arena.heaps.push_back({kCollectorHeap, kCollectorHeap + 64 + 96});
    model.arenas.push_back(arena);
    model.metadata.push_back({kCollectorHeap, kCollectorHeap + 64});
    model.figures.push_back({"toy_heap_size()", "its heap", 160, 160});
    return model;
  }
  std::optional<HeapVerification> verify(const HeapModel& part) const override {
    HeapVerification v;
    v.checked_in_own_words.push_back(fmt::format("toy collector: {} arena, {} blocks, arena 0 at {:#x}", part.arenas.size(),
                                         part.blocks.size(), part.arenas.at(0).address));
    for (const Block& b : part.blocks)
      if (b.arena != 0) v.notes.push_back("a block of another arena");
    return v;
  }
  bool owns_arena(const ArenaInfo& arena) const override { return arena.address == kCollectorHeap; }
};

class ToyCollectorPlugin final : public AllocatorPlugin {
 public:
  std::string_view name() const override { return "toy collector"; }
  bool beside_malloc() const override { return true; }
  std::unique_ptr<LocatedAllocator> locate(const Image& image, const SymbolIndex&, const MallocProvider&,
                                           std::string* why_not) const override {
    if (image.read_u64(kCollectorHeap) != kCollectorMagic) {
      *why_not = "no toy collector";
      return nullptr;
    }
    return std::make_unique<ToyCollector>();
  }
};

// The toy heap, and the collector's: toy block 0 points to object 1; nothing points to objects 0 and 2.
std::shared_ptr<FakeImage> toy_image_with_collector() {
  std::shared_ptr<FakeImage> image = toy_image();
  image->add_region(kCollectorHeap, 0x1000);
  image->put(kCollectorHeap, kCollectorMagic);
  image->put(toy_user(0) + 8, collector_object(1));
  return image;
}

}  // namespace

TEST_CASE("allocator plug-ins: a heap beside malloc's joins the same model, and its checks see only its arenas") {
  const ToyPlugin toy;
  const ToyCollectorPlugin collector;
  SessionOptions options;
  options.allocators = {&collector, &toy};  // a beside_malloc plug-in is never the malloc allocator, whatever its place
  Session s(toy_image_with_collector(), options);
  CHECK(s.allocator().name() == "toy + toy collector");

  const HeapModel& heap = s.heap();
  CHECK(heap.allocator == "toy + toy collector");
  CHECK(heap.version == "1.0");
  REQUIRE(heap.arenas.size() == 2);
  CHECK(heap.arenas[1].address == kCollectorHeap);
  REQUIRE(heap.blocks.size() == 8);
  for (std::size_t i = 1; i < heap.blocks.size(); ++i) CHECK(heap.blocks[i - 1].chunk < heap.blocks[i].chunk);
  CHECK(heap.blocks[0].chunk == collector_object(0));  // the collector's heap lies lower: merged in order
  CHECK(heap.blocks[0].arena == 1);
  CHECK(heap.blocks[3].arena == 0);
  REQUIRE(heap.figures.size() == 1);
  CHECK(heap.figures[0].name == "toy_heap_size()");

  // Objects 0 and 2 are unreachable; object 1 is held by a toy block; the toy heap's leaks stay its own.
  const nlohmann::json leaked = run_json(s, {"blocks", "--state", "leaked"});
  std::vector<Address> addresses;
  for (const auto& b : leaked["blocks"]) addresses.push_back(b["address"].get<Address>());
  CHECK(std::count(addresses.begin(), addresses.end(), collector_object(0)) == 1);
  CHECK(std::count(addresses.begin(), addresses.end(), collector_object(1)) == 0);
  CHECK(std::count(addresses.begin(), addresses.end(), collector_object(2)) == 1);
  CHECK(std::count(addresses.begin(), addresses.end(), toy_user(2)) == 1);

  // verify: the toy malloc has no checks (said), the collector's ran over its own arena alone.
  const nlohmann::json verify = run_json(s, {"verify"});
  REQUIRE(verify["checked_in_own_words"].size() == 1);
  CHECK(verify["checked_in_own_words"][0] == fmt::format("toy collector: 1 arena, 3 blocks, arena 0 at {:#x}", kCollectorHeap));
  CHECK(verify["not_checked"][0] == "toy has no checks of its own structures");
}

TEST_CASE("allocator plug-ins: without its heap in the image, a beside-malloc plug-in leaves malloc's allocator alone") {
  const ToyPlugin toy;
  const ToyCollectorPlugin collector;
  SessionOptions options;
  options.allocators = {&toy, &collector};
  Session s(toy_image(), options);
  CHECK(s.allocator().name() == "toy");
  CHECK(s.heap().arenas.size() == 1);
}
