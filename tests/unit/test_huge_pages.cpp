// The large arrays a command writes at once ask the kernel for transparent huge pages (base/huge_pages.h):
// the advice shows in /proc/self/smaps as the "hg" flag of the mapping that holds the array. Small arrays
// are not advised; nor are the pages of arrays shorter than one huge page.
#include <catch2/catch.hpp>

#include <sys/mman.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

#include "base/huge_pages.h"
#include "heap/block_array.h"
#include "model/u32_array.h"

using namespace heapscope;

namespace {

// The VmFlags of the mapping that holds `address`, from /proc/self/smaps ("" when none does).
std::string mapping_flags(const void* address) {
  const auto a = reinterpret_cast<std::uintptr_t>(address);
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    std::uintptr_t start = 0, end = 0;
    char dash = 0;
    std::istringstream range(line);
    if (range >> std::hex >> start >> dash >> end && dash == '-' && line.find(' ') != std::string::npos &&
        line.find(':') > line.find(' ')) {
      inside = start <= a && a < end;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line.substr(8) + " ";
    }
  }
  return "";
}

bool advised(const void* address) { return mapping_flags(address).find(" hg ") != std::string::npos; }

// A fresh anonymous mapping of `bytes`, unmapped at scope exit.
struct Mapping {
  explicit Mapping(std::size_t bytes) : size(bytes) {
    p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  }
  ~Mapping() { ::munmap(p, size); }
  void* p;
  std::size_t size;
};

}  // namespace

TEST_CASE("huge pages: an array of a huge page or more is advised, a smaller one is not") {
  Mapping large(4 * kHugePageArrayBytes), small(kHugePageArrayBytes / 2);
  REQUIRE(large.p != MAP_FAILED);
  REQUIRE(small.p != MAP_FAILED);
  REQUIRE_FALSE(mapping_flags(large.p).empty());  // the smaps reader finds the mapping
  CHECK_FALSE(advised(large.p));

  // Advice from a few bytes in (past malloc's chunk header) covers the page those bytes are on, so the
  // first 2 MiB of a mapping can be a huge page.
  advise_huge_pages(static_cast<char*>(large.p) + 16, large.size - 16);
  CHECK(advised(large.p));
  CHECK(advised(static_cast<char*>(large.p) + large.size - 1));

  advise_huge_pages(small.p, small.size);
  CHECK_FALSE(advised(small.p));
}

TEST_CASE("huge pages: the block array and a growing edge buffer ask for them once they are large") {
  BlockArray blocks(kHugePageArrayBytes / sizeof(Block) * 4);
  CHECK(advised(blocks.data()));
  BlockArray few(16);
  CHECK_FALSE(advised(few.data()));

  U32Buffer edges;
  for (std::uint32_t i = 0; i < 1024; ++i) edges.push_back(i);
  CHECK_FALSE(advised(edges.data()));  // 4 KiB, from malloc's heap
  for (std::uint32_t i = 0; edges.size() < 2 * kHugePageArrayBytes / sizeof(std::uint32_t); ++i) edges.push_back(i);
  CHECK(advised(edges.data()));
  CHECK(edges.data()[1023] == 1023);
}
