// The dynamic linker's module list and in-memory ELF headers, walked over hand-made memory.
#include <elf.h>

#include <catch2/catch.hpp>

#include "core_builder.h"
#include "image/link_map.h"

using namespace heapscope;
using heapscope::testing::make_elf_module;
using heapscope::testing::MemoryBlock;

namespace {

// Process memory made of separate blocks; reads stop at the end of a block, as at an unmapped page.
struct FakeMemory {
  std::vector<MemoryBlock> blocks;

  MemoryBlock& add(Address vaddr, std::size_t size) {
    blocks.emplace_back(vaddr, size);
    return blocks.back();
  }

  MemoryReader reader() const {
    return [this](Address addr, void* out, std::size_t len) -> std::size_t {
      for (const MemoryBlock& b : blocks) {
        if (!b.contains(addr)) continue;
        const std::size_t n = std::min<std::size_t>(len, b.end() - addr);
        std::memcpy(out, b.bytes.data() + (addr - b.vaddr), n);
        return n;
      }
      return 0;
    };
  }
};

struct Node {
  Address l_addr;
  std::string name;
  Address l_ld;
};

constexpr Address kRDebug = 0x7f0000010000;
constexpr Address kFirstNode = kRDebug + 0x100;
constexpr Address kNodeStride = 0x100;  // each node: 40 bytes of link_map, then its name

Address node_address(std::size_t i) { return kFirstNode + i * kNodeStride; }

// r_debug (r_version 1, r_map) followed by a doubly linked chain of nodes.
MemoryBlock& write_chain(FakeMemory& memory, const std::vector<Node>& nodes) {
  MemoryBlock& block = memory.add(kRDebug, 0x100 + nodes.size() * kNodeStride);
  block.put_u32(kRDebug, 1);
  block.put_u64(kRDebug + 8, nodes.empty() ? 0 : node_address(0));
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const Address node = node_address(i);
    block.put_u64(node, nodes[i].l_addr);
    block.put_u64(node + 8, node + 64);
    block.put_u64(node + 16, nodes[i].l_ld);
    block.put_u64(node + 24, i + 1 < nodes.size() ? node_address(i + 1) : 0);
    block.put_u64(node + 32, i > 0 ? node_address(i - 1) : 0);
    block.put_string(node + 64, nodes[i].name);
  }
  return block;
}

bool any_warning_contains(const std::vector<std::string>& warnings, const std::string& text) {
  for (const std::string& w : warnings)
    if (w.find(text) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("walk_link_map follows the dynamic linker's list", "[link_map]") {
  FakeMemory memory;
  write_chain(memory, {{0x555555554000, "", 0x555555557de0},
                       {0x7ffff7fc1000, "linux-vdso.so.1", 0x7ffff7fc13e0},
                       {0x7ffff7d80000, "/lib/x86_64-linux-gnu/libc.so.6", 0x7ffff7f9ab60}});
  std::vector<std::string> warnings;
  const auto entries = walk_link_map(memory.reader(), kRDebug, &warnings);

  REQUIRE(entries.size() == 3);
  CHECK(warnings.empty());
  CHECK(entries[0].node == node_address(0));
  CHECK(entries[0].name.empty());
  CHECK(entries[0].l_addr == 0x555555554000);
  CHECK(entries[1].name == "linux-vdso.so.1");
  CHECK(entries[2].name == "/lib/x86_64-linux-gnu/libc.so.6");
  CHECK(entries[2].l_addr == 0x7ffff7d80000);
  CHECK(entries[2].l_ld == 0x7ffff7f9ab60);
  CHECK(entries[2].name_readable);
}

TEST_CASE("walk_link_map keeps entries whose name is null or unreadable", "[link_map]") {
  FakeMemory memory;
  MemoryBlock& block = write_chain(memory, {{0x1000, "x", 0}, {0x2000, "y", 0}});
  block.put_u64(node_address(0) + 8, 0);             // l_name == NULL
  block.put_u64(node_address(1) + 8, 0xdead00000000);  // l_name points nowhere
  std::vector<std::string> warnings;
  const auto entries = walk_link_map(memory.reader(), kRDebug, &warnings);
  REQUIRE(entries.size() == 2);
  CHECK(entries[0].name.empty());
  CHECK(entries[0].name_readable);
  CHECK(entries[1].name.empty());
  CHECK_FALSE(entries[1].name_readable);
  CHECK(entries[1].l_addr == 0x2000);
}

TEST_CASE("walk_link_map stops at a cycle with a warning", "[link_map]") {
  FakeMemory memory;
  MemoryBlock& block = write_chain(memory, {{0x1000, "a", 0}, {0x2000, "b", 0}, {0x3000, "c", 0}});
  block.put_u64(node_address(2) + 24, node_address(0));  // c.l_next = a
  std::vector<std::string> warnings;
  const auto entries = walk_link_map(memory.reader(), kRDebug, &warnings);
  CHECK(entries.size() == 3);
  CHECK(any_warning_contains(warnings, "loops back"));
}

TEST_CASE("walk_link_map stops at a self-loop", "[link_map]") {
  FakeMemory memory;
  MemoryBlock& block = write_chain(memory, {{0x1000, "a", 0}});
  block.put_u64(node_address(0) + 24, node_address(0));
  std::vector<std::string> warnings;
  CHECK(walk_link_map(memory.reader(), kRDebug, &warnings).size() == 1);
  CHECK(any_warning_contains(warnings, "loops back"));
}

TEST_CASE("walk_link_map stops at a garbage l_next", "[link_map]") {
  FakeMemory memory;
  MemoryBlock& block = write_chain(memory, {{0x1000, "a", 0}, {0x2000, "b", 0}});
  block.put_u64(node_address(1) + 24, 0x4141414141414141);
  std::vector<std::string> warnings;
  const auto entries = walk_link_map(memory.reader(), kRDebug, &warnings);
  CHECK(entries.size() == 2);
  CHECK(any_warning_contains(warnings, "not readable"));
}

TEST_CASE("walk_link_map caps an overlong list", "[link_map]") {
  FakeMemory memory;
  std::vector<Node> nodes(10, Node{0x1000, "lib", 0});
  write_chain(memory, nodes);
  std::vector<std::string> warnings;
  const auto entries = walk_link_map(memory.reader(), kRDebug, &warnings, 4);
  CHECK(entries.size() == 4);
  CHECK(any_warning_contains(warnings, "more than 4 entries"));
}

TEST_CASE("walk_link_map notices a broken back link once", "[link_map]") {
  FakeMemory memory;
  MemoryBlock& block = write_chain(memory, {{0x1000, "a", 0}, {0x2000, "b", 0}, {0x3000, "c", 0}});
  block.put_u64(node_address(1) + 32, 0x1234);
  block.put_u64(node_address(2) + 32, 0x5678);
  std::vector<std::string> warnings;
  CHECK(walk_link_map(memory.reader(), kRDebug, &warnings).size() == 3);
  CHECK(warnings.size() == 1);
  CHECK(any_warning_contains(warnings, "l_prev"));
}

TEST_CASE("walk_link_map reports an unreadable r_debug", "[link_map]") {
  FakeMemory memory;
  std::vector<std::string> warnings;
  CHECK(walk_link_map(memory.reader(), kRDebug, &warnings).empty());
  CHECK(any_warning_contains(warnings, "r_debug"));
}

namespace {

constexpr Address kExeBias = 0x555555554000;
constexpr Address kPhdrVaddr = 0x40;
constexpr Address kDynamicVaddr = 0x2000;

void put_phdr(MemoryBlock& block, Address at, std::uint32_t type, Address vaddr, std::uint64_t size,
              std::uint64_t offset = 0) {
  Elf64_Phdr ph{};
  ph.p_type = type;
  ph.p_offset = offset;
  ph.p_vaddr = vaddr;
  ph.p_filesz = ph.p_memsz = size;
  block.put_bytes(at, &ph, sizeof ph);
}

// An executable's first pages in memory: ELF header, program headers (PT_PHDR optional, PT_LOAD,
// PT_DYNAMIC), and a dynamic section whose DT_DEBUG holds `r_debug`.
std::vector<AuxvEntry> write_executable(FakeMemory& memory, Address r_debug, bool with_pt_phdr,
                                        bool with_dynamic = true) {
  MemoryBlock& block = memory.add(kExeBias, 0x3000);
  Elf64_Ehdr eh{};
  std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_phoff = kPhdrVaddr;
  eh.e_phentsize = sizeof(Elf64_Phdr);
  std::uint16_t count = 0;
  Address at = kExeBias + kPhdrVaddr;
  auto add = [&](std::uint32_t type, Address vaddr, std::uint64_t size) {
    put_phdr(block, at, type, vaddr, size, vaddr);
    at += sizeof(Elf64_Phdr);
    ++count;
  };
  if (with_pt_phdr) add(PT_PHDR, kPhdrVaddr, 3 * sizeof(Elf64_Phdr));
  add(PT_LOAD, 0, 0x3000);
  if (with_dynamic) add(PT_DYNAMIC, kDynamicVaddr, 3 * sizeof(Elf64_Dyn));
  eh.e_phnum = count;
  block.put_bytes(kExeBias, &eh, sizeof eh);

  const Address dynamic = kExeBias + kDynamicVaddr;
  block.put_u64(dynamic, DT_FLAGS_1);
  block.put_u64(dynamic + 8, 0);
  block.put_u64(dynamic + 16, DT_DEBUG);
  block.put_u64(dynamic + 24, r_debug);
  block.put_u64(dynamic + 32, DT_NULL);
  return {{AT_PHDR, kExeBias + kPhdrVaddr}, {AT_PHENT, sizeof(Elf64_Phdr)}, {AT_PHNUM, count},
          {AT_ENTRY, kExeBias + 0x1000}};
}

}  // namespace

TEST_CASE("find_r_debug follows AT_PHDR, PT_PHDR and DT_DEBUG", "[link_map]") {
  FakeMemory memory;
  const auto auxv = write_executable(memory, kRDebug, true);
  std::vector<std::string> warnings;
  CHECK(find_r_debug(memory.reader(), auxv, &warnings) == kRDebug);
  CHECK(warnings.empty());
}

TEST_CASE("find_r_debug finds the load bias from the ELF header when PT_PHDR is missing", "[link_map]") {
  FakeMemory memory;
  const auto auxv = write_executable(memory, kRDebug, false);
  std::vector<std::string> warnings;
  CHECK(find_r_debug(memory.reader(), auxv, &warnings) == kRDebug);
  CHECK(warnings.empty());
}

TEST_CASE("find_r_debug is silent for a static executable", "[link_map]") {
  FakeMemory memory;
  const auto auxv = write_executable(memory, kRDebug, true, false);
  std::vector<std::string> warnings;
  CHECK_FALSE(find_r_debug(memory.reader(), auxv, &warnings).has_value());
  CHECK(warnings.empty());
}

TEST_CASE("find_r_debug explains why it found nothing", "[link_map]") {
  std::vector<std::string> warnings;
  SECTION("DT_DEBUG not filled in yet") {
    FakeMemory memory;
    const auto auxv = write_executable(memory, 0, true);
    CHECK_FALSE(find_r_debug(memory.reader(), auxv, &warnings).has_value());
    CHECK(any_warning_contains(warnings, "DT_DEBUG is still 0"));
  }
  SECTION("no AT_PHDR") {
    FakeMemory memory;
    CHECK_FALSE(find_r_debug(memory.reader(), {{AT_PAGESZ, 4096}}, &warnings).has_value());
    CHECK(any_warning_contains(warnings, "AT_PHDR"));
  }
  SECTION("a garbage AT_PHNUM allocates nothing") {
    FakeMemory memory;
    auto auxv = write_executable(memory, kRDebug, true);
    for (AuxvEntry& e : auxv)
      if (e.type == AT_PHNUM) e.value = std::uint64_t{1} << 40;
    CHECK_FALSE(find_r_debug(memory.reader(), auxv, &warnings).has_value());
    CHECK(any_warning_contains(warnings, "program headers"));
  }
  SECTION("program headers not in memory") {
    FakeMemory memory;
    CHECK_FALSE(find_r_debug(memory.reader(), {{AT_PHDR, 0x400040}, {AT_PHNUM, 9}}, &warnings).has_value());
    CHECK(any_warning_contains(warnings, "not readable"));
  }
}

TEST_CASE("read_link_map combines both steps", "[link_map]") {
  FakeMemory memory;
  const auto auxv = write_executable(memory, kRDebug, true);
  write_chain(memory, {{kExeBias, "", kExeBias + kDynamicVaddr}, {0x7f0000200000, "/lib/libm.so.6", 0}});
  std::vector<std::string> warnings;
  const LinkMapResult result = read_link_map(memory.reader(), auxv, &warnings);
  CHECK(result.r_debug == kRDebug);
  REQUIRE(result.entries.size() == 2);
  CHECK(result.entries[1].name == "/lib/libm.so.6");
  CHECK(warnings.empty());
}

TEST_CASE("inspect_mapped_elf reads the build-id and load bias from memory", "[link_map]") {
  const std::vector<std::uint8_t> id = {0xde, 0xad, 0xbe, 0xef, 0x01, 0x02, 0x03, 0x04};
  const auto image = make_elf_module(id, std::vector<std::byte>(16));
  constexpr Address base = 0x7f1234560000;

  SECTION("header and note present") {
    FakeMemory memory;
    memory.add(base, image.size()).put_bytes(base, image.data(), image.size());
    const auto info = inspect_mapped_elf(memory.reader(), base);
    REQUIRE(info.has_value());
    CHECK(info->load_bias == base);
    CHECK(info->build_id == "deadbeef01020304");
    CHECK(info->notes_readable);
  }
  SECTION("note not in memory") {
    FakeMemory memory;
    const std::size_t headers = sizeof(Elf64_Ehdr) + 2 * sizeof(Elf64_Phdr);
    memory.add(base, headers).put_bytes(base, image.data(), headers);
    const auto info = inspect_mapped_elf(memory.reader(), base);
    REQUIRE(info.has_value());
    CHECK_FALSE(info->build_id.has_value());
    CHECK_FALSE(info->notes_readable);
  }
  SECTION("not an ELF header") {
    FakeMemory memory;
    memory.add(base, 0x1000).fill(base, 0x1000, 0x41);
    CHECK_FALSE(inspect_mapped_elf(memory.reader(), base).has_value());
  }
  SECTION("nothing mapped") {
    FakeMemory memory;
    CHECK_FALSE(inspect_mapped_elf(memory.reader(), base).has_value());
  }
}
