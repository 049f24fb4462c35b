// Retainer paths prefer pointers to block starts: a pointer into the middle of a block is as often a stale
// word as a real reference, so of two paths of about the same length the one through start pointers is
// shown. `refs` says where in the target each pointer lands.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include <vector>

#include "fake_image.h"
#include "toy_session.h"

using namespace heapscope;
using heapscope::testing::FakeImage;
using heapscope::testing::PackedToyPlugin;

namespace {

constexpr Address kObjects = 0x7e0000000000;
constexpr Address kGlobals = 0x555555550000;
constexpr std::uint64_t kObjectSize = 32;

// `count` packed 32-byte objects and a region of globals (an anonymous root) pointing at none of them yet.
struct PathHeap {
  std::shared_ptr<FakeImage> image = std::make_shared<FakeImage>();
  std::size_t count;

  explicit PathHeap(std::size_t objects) : count(objects) {
    image->add_region(kObjects, count * kObjectSize);
    image->add_region(kGlobals, 0x1000);
  }
  static Address object(std::size_t i) { return kObjects + i * kObjectSize; }
  // Global word `slot` points to object `to`.
  void anchor(std::size_t slot, std::size_t to, std::uint64_t into = 0) { image->put(kGlobals + 8 * slot, object(to) + into); }
  // Object `from`'s first word points `into` bytes into object `to`.
  void link(std::size_t from, std::size_t to, std::uint64_t into = 0) { image->put(object(from), object(to) + into); }
  nlohmann::json run(const std::vector<std::string>& command) const {
    return heapscope::testing::command_json(image, PackedToyPlugin(kObjects, std::vector(count, kObjectSize)), command);
  }
  // The addresses of each retainer path of object `target`, the first (the cheapest) first.
  std::vector<std::vector<Address>> paths_to(std::size_t target, std::size_t most = 1) const {
    const nlohmann::json r = run({"retainers", fmt::format("{:#x}", object(target)), "--paths", std::to_string(most)});
    std::vector<std::vector<Address>> paths;
    for (const auto& path : r["paths"]) {
      paths.emplace_back();
      for (const auto& step : path["steps"]) paths.back().push_back(step["address"]);
    }
    return paths;
  }
  std::vector<Address> path_to(std::size_t target) const {
    const auto paths = paths_to(target);
    REQUIRE(paths.size() == 1);
    return paths.front();
  }
};

// Objects 0 and 1 make the path through an interior pointer: global → 0 → +0x10 into 1 → target. They come
// first in the heap, so a search that takes the first path it meets of a length takes theirs.
constexpr std::size_t kTarget = 2;
void interior_path(PathHeap& h) {
  h.anchor(0, 0);
  h.link(0, 1, 0x10);
  h.link(1, kTarget);
}

// A path of start pointers from global word 1 through `blocks` objects from 3 on, to the target.
void start_path(PathHeap& h, std::size_t blocks) {
  h.anchor(1, 3);
  for (std::size_t i = 3; i < 3 + blocks - 1; ++i) h.link(i, i + 1);
  h.link(3 + blocks - 1, kTarget);
}

std::vector<Address> objects(std::initializer_list<std::size_t> ids) {
  std::vector<Address> at;
  for (std::size_t i : ids) at.push_back(PathHeap::object(i));
  return at;
}

}  // namespace

TEST_CASE("retainers: of two paths of one length, the one through pointers to block starts") {
  PathHeap h(5);
  interior_path(h);
  start_path(h, 2);
  CHECK(h.path_to(kTarget) == objects({3, 4, kTarget}));
}

TEST_CASE("retainers: a path of start pointers one block longer than one through an interior pointer") {
  PathHeap h(6);
  interior_path(h);
  start_path(h, 3);
  CHECK(h.path_to(kTarget) == objects({3, 4, 5, kTarget}));
}

TEST_CASE("retainers: an interior pointer's path two blocks shorter than the start pointers' one") {
  PathHeap h(7);
  interior_path(h);
  start_path(h, 4);
  CHECK(h.path_to(kTarget) == objects({0, 1, kTarget}));
}

TEST_CASE("retainers: a root's pointer into the target's middle costs what a block's does") {
  // Global word 0 points 0x10 into the target; word 1 points at object 3, which points at the target's
  // start: one block more, through start pointers only, is the path shown first.
  PathHeap h(4);
  h.anchor(0, kTarget, 0x10);
  h.anchor(1, 3);
  h.link(3, kTarget);
  CHECK(h.path_to(kTarget) == objects({3, kTarget}));
  CHECK(h.paths_to(kTarget, 5) == std::vector{objects({3, kTarget}), objects({kTarget})});
}

TEST_CASE("retainers: one root range gives a path through each block it holds, as many as asked") {
  // The globals (one root range) hold objects 3 to 8, each pointing at the target.
  PathHeap h(9);
  for (std::size_t i = 3; i < 9; ++i) {
    h.anchor(i, i);
    h.link(i, kTarget);
  }
  CHECK(h.paths_to(kTarget, 6).size() == 6);
  CHECK(h.paths_to(kTarget, 4).size() == 4);
  CHECK(h.paths_to(kTarget, 10).size() == 6);
}

TEST_CASE("refs: each referrer says where in the target its pointer lands") {
  PathHeap h(3);
  interior_path(h);
  h.anchor(2, 1, 0x8);  // a global word 8 bytes into object 1 too
  const nlohmann::json r = h.run({"refs", fmt::format("{:#x}", PathHeap::object(1))});
  REQUIRE(r["referrers"].size() == 2);
  const nlohmann::json& block = r["referrers"][0];
  CHECK(block["kind"] == "block");
  CHECK(block["address"] == PathHeap::object(0));
  CHECK(block["into"] == 0x10);
  const nlohmann::json& root = r["referrers"][1];
  CHECK(root["kind"] == "root");
  CHECK(root["address"] == kGlobals + 16);
  CHECK(root["into"] == 0x8);

  SessionOptions options;
  const PackedToyPlugin toy(kObjects, std::vector(h.count, kObjectSize));
  options.allocators = {&toy};
  Session s(h.image, options);
  const CommandResult text = execute_command_line(s, {"refs", fmt::format("{:#x}", PathHeap::object(1))});
  CHECK(text.output.find(fmt::format("→ +0x10 into 0x{:x}", PathHeap::object(1))) != std::string::npos);
  CHECK(text.output.find(fmt::format("→ +0x8 into 0x{:x}", PathHeap::object(1))) != std::string::npos);
}
