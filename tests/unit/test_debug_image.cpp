// The inflated image of a debug file whose DWARF is compressed (dwarf/debug_image.h) must read, through
// libdw, exactly as the file does when libdw inflates it itself; anything it does not cover is left to
// libdw. libc6-dbg's file (a test dependency, compressed as Debian ships it) is the real case.
#include <fcntl.h>
#include <gelf.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "dwarf/debug_image.h"
#include "dwarf/dwarf_file.h"
#include "elf/elf_file.h"
#include "libc_debug_file.h"

using namespace heapscope;
using heapscope::testing::libc_debug_file;

namespace {

// Every DIE's offset, tag and name, in order, as one string.
std::string every_die(Dwarf* dwarf) {
  std::string out;
  Dwarf_Off offset = 0, next = 0;
  std::size_t header = 0;
  std::vector<Dwarf_Die> stack;
  while (dwarf_nextcu(dwarf, offset, &next, &header, nullptr, nullptr, nullptr) == 0) {
    Dwarf_Die unit;
    if (dwarf_offdie(dwarf, offset + header, &unit)) stack.push_back(unit);
    while (!stack.empty()) {
      Dwarf_Die die = stack.back();
      stack.pop_back();
      const char* name = dwarf_diename(&die);
      out += std::to_string(dwarf_dieoffset(&die)) + ":" + std::to_string(dwarf_tag(&die)) + ":" + (name ? name : "") + "\n";
      Dwarf_Die child;
      if (dwarf_child(&die, &child) == 0) {
        std::vector<Dwarf_Die> children;
        do children.push_back(child);
        while (dwarf_siblingof(&child, &child) == 0);
        stack.insert(stack.end(), children.rbegin(), children.rend());
      }
    }
    offset = next;
  }
  return out;
}

std::string every_die_as_libdw_reads(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  REQUIRE(fd >= 0);
  Dwarf* dwarf = dwarf_begin(fd, DWARF_C_READ);
  REQUIRE(dwarf);
  std::string out = every_die(dwarf);
  dwarf_end(dwarf);
  ::close(fd);
  return out;
}

std::optional<DebugImage> image_of(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  REQUIRE(fd >= 0);
  std::optional<DebugImage> image = inflated_debug_image(fd);
  ::close(fd);
  return image;
}

}  // namespace

TEST_CASE("libc6-dbg's compressed DWARF reads from the inflated image as libdw reads the file", "[dwarf]") {
  const std::string path = libc_debug_file();
  REQUIRE(image_of(path));  // the case this is for: compressed sections
  std::string error;
  const std::unique_ptr<DwarfFile> file = DwarfFile::open(path, &error);
  REQUIRE(file);
  const std::string from_image = every_die(file->dwarf());
  CHECK(from_image.size() > 1000000);  // libc's DWARF, not an empty image
  CHECK(from_image == every_die_as_libdw_reads(path));
}

TEST_CASE("a file with no compressed DWARF, or compressed sections that do not inflate, is left to libdw", "[dwarf]") {
  SECTION("this test program's own uncompressed DWARF") { CHECK_FALSE(image_of("/proc/self/exe")); }
  SECTION("libc6-dbg's file with bytes of its compressed .debug_info changed") {
    const std::string path = libc_debug_file();
    std::ifstream in(path, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // Where .debug_info's compressed stream lies in the file.
    elf_version(EV_CURRENT);
    Elf* elf = elf_memory(bytes.data(), bytes.size());
    REQUIRE(elf);
    std::size_t names = 0;
    REQUIRE(elf_getshdrstrndx(elf, &names) == 0);
    GElf_Shdr info{};
    for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
      GElf_Shdr h;
      REQUIRE(gelf_getshdr(scn, &h));
      if (std::strcmp(elf_strptr(elf, names, h.sh_name), ".debug_info") == 0) info = h;
    }
    elf_end(elf);
    REQUIRE((info.sh_flags & SHF_COMPRESSED));
    for (std::size_t i = 0; i < 64; ++i) bytes[info.sh_offset + info.sh_size / 2 + i] ^= 0x5a;
    const std::string damaged = std::filesystem::temp_directory_path() / ("heapscope-damaged-" + std::to_string(getpid()) + ".debug");
    std::ofstream(damaged, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    CHECK_FALSE(image_of(damaged));
    // libdw then reads the file itself: it fails or not, but the open does not crash or hang.
    std::string error;
    const std::unique_ptr<DwarfFile> file = DwarfFile::open(damaged, &error);
    CHECK((file != nullptr || !error.empty()));
    std::filesystem::remove(damaged);
  }
}
