// A command run on an image whose heap a test's own allocator plug-in walks, its JSON parsed: how the unit
// tests check a whole report over a heap they laid out.
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
