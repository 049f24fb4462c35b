// A command run on an image whose heap a test's own allocator plug-in walks, its JSON parsed: how the unit
// tests check a whole report over a heap they laid out; and the simplest such plug-in, packed objects.
#pragma once

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

#include "commands/command_line.h"
#include "runtime/allocator.h"
#include "session/session.h"

namespace heapscope::testing {

// Headerless objects of the given sizes, packed from `start` on, all in use.
class PackedToy final : public LocatedAllocator {
 public:
  PackedToy(Address start, std::vector<std::uint64_t> sizes) : start_(start), sizes_(std::move(sizes)) {}
  std::string name() const override { return "packed toy"; }
  std::optional<HeapModel> walk(std::string*) const override {
    HeapModel model;
    model.allocator = "packed toy";
    Address at = start_;
    for (const std::uint64_t size : sizes_) {
      model.blocks.push_back(Block::bare(at, size, BlockState::in_use, 0));
      at += size;
    }
    ArenaInfo arena;
    arena.heaps.push_back({start_, at});
    model.arenas.push_back(arena);
    return model;
  }

 private:
  Address start_;
  std::vector<std::uint64_t> sizes_;
};

class PackedToyPlugin final : public AllocatorPlugin {
 public:
  PackedToyPlugin(Address start, std::vector<std::uint64_t> sizes) : start_(start), sizes_(std::move(sizes)) {}
  std::string_view name() const override { return "packed toy"; }
  std::unique_ptr<LocatedAllocator> locate(const Image&, const SymbolIndex&, const MallocProvider&,
                                           std::string*) const override {
    return std::make_unique<PackedToy>(start_, sizes_);
  }

 private:
  Address start_;
  std::vector<std::uint64_t> sizes_;
};

inline nlohmann::json command_json(std::shared_ptr<const Image> image, const AllocatorPlugin& allocator,
                                   std::vector<std::string> command) {
  SessionOptions options;
  options.allocators = {&allocator};
  Session s(std::move(image), options);
  command.push_back("--json");
  const CommandResult r = execute_command_line(s, command);
  INFO(r.error);
  REQUIRE(r.exit_code == 0);
  return nlohmann::json::parse(r.output);
}

}  // namespace heapscope::testing
