// The path of libc6-dbg's debug file for this machine's libc (a test dependency): DWARF as Debian ships
// it, compressed, the real case of the DWARF readers' tests.
#pragma once

#include <catch2/catch.hpp>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "elf/elf_file.h"

namespace heapscope::testing {

inline std::string libc_debug_file() {
  const std::unique_ptr<ElfFile> libc = ElfFile::open("/lib/x86_64-linux-gnu/libc.so.6", nullptr);
  REQUIRE(libc);
  const std::optional<std::string> id = libc->build_id();
  REQUIRE(id);
  const std::string path = "/usr/lib/debug/.build-id/" + id->substr(0, 2) + "/" + id->substr(2) + ".debug";
  INFO("libc6-dbg's file for this libc: " << path);
  REQUIRE(std::filesystem::exists(path));
  return path;
}

}  // namespace heapscope::testing
