// The DIE scanner (dwarf/die_scanner.h) must read every DIE as libdw does: the same DIEs in the same order,
// with the same own attributes, skipping a DIE's children to the same next DIE — over real DWARF of three
// producers: libc6-dbg (GCC, C, DWARF 5, compressed), a C++ fixture built by GCC, and the same built by
// Clang (string offsets, implicit constants). Damaged bytes end a unit's reading, never out of bounds.
#include <catch2/catch.hpp>
#include <dwarf.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "dwarf/die_scanner.h"
#include "dwarf/dwarf_file.h"
#include "libc_debug_file.h"
#include "scanned_file.h"

using namespace heapscope;

namespace {

std::string own_string(Dwarf_Die& die, int attribute) {
  Dwarf_Attribute attr;
  const char* s = dwarf_attr(&die, attribute, &attr) ? dwarf_formstring(&attr) : nullptr;
  return s ? s : "(none)";
}

std::string own_reference(Dwarf_Die& die, int attribute) {
  Dwarf_Attribute attr;
  Dwarf_Die target;
  if (!dwarf_attr(&die, attribute, &attr) || !dwarf_formref_die(&attr, &target)) return "-";
  return std::to_string(dwarf_dieoffset(&target));
}

std::string own_number(Dwarf_Die& die, int attribute) {
  Dwarf_Attribute attr;
  Dwarf_Word value = 0;
  if (!dwarf_attr(&die, attribute, &attr) || dwarf_formudata(&attr, &value) != 0) return "-";
  return std::to_string(value);
}

std::string own_flag(Dwarf_Die& die, int attribute) {
  Dwarf_Attribute attr;
  bool flag = false;
  if (!dwarf_attr(&die, attribute, &attr)) return "-";
  return dwarf_formflag(&attr, &flag) == 0 && flag ? "1" : "0";
}

std::string own_block_size(Dwarf_Die& die, int attribute) {
  Dwarf_Attribute attr;
  Dwarf_Block block;
  if (!dwarf_attr(&die, attribute, &attr) || dwarf_formblock(&attr, &block) != 0 || block.length == 0) return "-";
  return std::to_string(block.length);
}

// One DIE as a line: with `attributes`, also the ones the scanner reads.
std::string line(Dwarf_Die& die, bool attributes) {
  std::string out = std::to_string(dwarf_dieoffset(&die)) + " " + std::to_string(dwarf_tag(&die)) + " " +
                    (dwarf_haschildren(&die) ? "+" : ".");
  if (!attributes) return out + "\n";
  const std::string origin = own_reference(die, DW_AT_abstract_origin);
  return out + " " + own_string(die, DW_AT_name) + " type=" + own_reference(die, DW_AT_type) +
         " spec=" + own_reference(die, DW_AT_specification) +
         " origin=" + (origin != "-" ? origin : own_reference(die, DW_AT_specification)) +
         " size=" + own_number(die, DW_AT_byte_size) + " decl=" + own_flag(die, DW_AT_declaration) +
         " lang=" + own_number(die, DW_AT_language) + " loc=" + own_block_size(die, DW_AT_location) + "\n";
}

std::string line(const ScannedDie& die, bool attributes) {
  std::string out = std::to_string(die.offset) + " " + std::to_string(die.tag) + " " + (die.has_children ? "+" : ".");
  if (!attributes) return out + "\n";
  auto reference = [](std::uint64_t offset) { return offset ? std::to_string(offset) : std::string("-"); };
  auto number = [](const auto& value) { return value ? std::to_string(*value) : std::string("-"); };
  return out + " " + (die.name ? die.name : "(none)") + " type=" + reference(die.type) +
         " spec=" + reference(die.specification) + " origin=" + reference(die.origin) +
         " size=" + number(die.byte_size) +
         " decl=" + (die.declaration ? (*die.declaration ? "1" : "0") : "-") + " lang=" + number(die.language) +
         " loc=" + (die.location.empty() ? "-" : std::to_string(die.location.size())) +
         (die.foreign ? " foreign" : "") + "\n";
}

using SkipChildren = std::function<bool(int tag)>;

// Every DIE in order, as libdw walks them, leaving out the children of those `skip` names.
void libdw_walk(Dwarf_Die& die, const SkipChildren& skip, bool attributes, std::string& out) {
  out += line(die, attributes);
  Dwarf_Die child;
  if (skip(dwarf_tag(&die)) || dwarf_child(&die, &child) != 0) return;
  do libdw_walk(child, skip, attributes, out);
  while (dwarf_siblingof(&child, &child) == 0);
}

std::string libdw_reads(Dwarf* dwarf, const SkipChildren& skip, bool attributes) {
  std::string out;
  Dwarf_Off offset = 0, next = 0;
  std::size_t header = 0;
  while (dwarf_next_unit(dwarf, offset, &next, &header, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr) == 0) {
    Dwarf_Die root;
    if (dwarf_offdie(dwarf, offset + header, &root)) libdw_walk(root, skip, attributes, out);
    offset = next;
  }
  return out;
}

void scanner_walk(DieScanner& unit, const ScannedDie& die, const SkipChildren& skip, bool attributes, std::string& out) {
  out += line(die, attributes);
  if (skip(die.tag)) return unit.skip_children(die);
  if (!die.has_children) return;
  ScannedDie child;
  while (unit.next(child)) scanner_walk(unit, child, skip, attributes, out);
}

std::string scanner_reads(Dwarf* dwarf, DieScanner::TagFilter reads, const SkipChildren& skip, bool attributes) {
  const std::optional<DieSections> sections = DieSections::of(dwarf);
  REQUIRE(sections);
  std::string out;
  std::size_t failed = 0;
  DieScanner::for_each_unit(dwarf, *sections, reads, [&](DieScanner& unit) {
    ScannedDie root;
    if (unit.next(root)) scanner_walk(unit, root, skip, attributes, out);
    failed += unit.failed();
  });
  CHECK(failed == 0);
  return out;
}

bool every_tag(int) { return true; }
bool no_tag(int) { return false; }

void check_reads_as_libdw(const std::string& path) {
  INFO(path);
  std::string error;
  const std::unique_ptr<DwarfFile> file = DwarfFile::open(path, &error);
  REQUIRE(file);
  const SkipChildren none = [](int) { return false; };
  const SkipChildren scopes = [](int tag) {
    return tag == DW_TAG_structure_type || tag == DW_TAG_class_type || tag == DW_TAG_subprogram;
  };
  const std::string all = libdw_reads(file->dwarf(), none, true);
  CHECK(std::count(all.begin(), all.end(), '\n') > 1000);
  CHECK(scanner_reads(file->dwarf(), every_tag, none, true) == all);
  CHECK(scanner_reads(file->dwarf(), every_tag, scopes, true) == libdw_reads(file->dwarf(), scopes, true));
  // Of a DIE whose tag the caller does not read, its place, tag and children still are.
  CHECK(scanner_reads(file->dwarf(), no_tag, scopes, false) == libdw_reads(file->dwarf(), scopes, false));
}

}  // namespace

TEST_CASE("the DIE scanner reads every DIE as libdw does", "[dwarf]") {
  SECTION("libc6-dbg: GCC, C, compressed") { check_reads_as_libdw(heapscope::testing::libc_debug_file()); }
  SECTION("a fixture built by GCC: C++") { check_reads_as_libdw(HEAPSCOPE_FIXTURE_DIR "/coroutine_pipeline"); }
  SECTION("a fixture built by Clang") { check_reads_as_libdw(HEAPSCOPE_FIXTURE_DIR "/coroutine_pipeline_clang"); }
}

namespace {

// Every DIE that names an origin in its own unit: the scanner's die_at reads the origin as libdw does.
void check_origins_read_as_libdw(const std::string& path) {
  INFO(path);
  const heapscope::testing::ScannedFile file(path);
  std::size_t origins = 0, outside = 0;
  file.for_each_die(every_tag, [&](DieScanner& scanner, const DieScanner::Unit& unit, const ScannedDie& die) {
    if (!die.origin) return;
    const std::optional<ScannedDie> origin = scanner.die_at(die.origin);
    if (die.origin < unit.root || die.origin >= unit.end) {
      CHECK_FALSE(origin);
      ++outside;
      return;
    }
    REQUIRE(origin);
    Dwarf_Die libdw;
    REQUIRE(dwarf_offdie(file.dwarf(), die.origin, &libdw));
    CHECK(line(*origin, true) == line(libdw, true));
    ++origins;
  });
  CHECK(origins > 100);
  CHECK(outside == 0);  // GCC and Clang refer to origins within the unit
  // Past a unit's DIEs, and of a tag the caller does not read, there is nothing to read.
  for (const DieScanner::Unit& unit : DieScanner::units_of(file.dwarf(), file.sections())) {
    DieScanner scanner(file.sections(), unit, every_tag);
    CHECK_FALSE(scanner.die_at(unit.end));
    CHECK_FALSE(scanner.die_at(unit.offset));
    DieScanner reads_nothing(file.sections(), unit, no_tag);
    CHECK_FALSE(reads_nothing.die_at(unit.root));
  }
}

}  // namespace

TEST_CASE("the DIE scanner reads a unit's DIE at an offset as libdw does", "[dwarf]") {
  SECTION("libc6-dbg") { check_origins_read_as_libdw(heapscope::testing::libc_debug_file()); }
  SECTION("a fixture built by GCC") { check_origins_read_as_libdw(HEAPSCOPE_FIXTURE_DIR "/coroutine_pipeline"); }
  SECTION("a fixture built by Clang") { check_origins_read_as_libdw(HEAPSCOPE_FIXTURE_DIR "/coroutine_pipeline_clang"); }
}

TEST_CASE("damaged DIE bytes end a unit's reading inside its bounds", "[dwarf]") {
  std::string error;
  const std::unique_ptr<DwarfFile> file = DwarfFile::open(HEAPSCOPE_FIXTURE_DIR "/coroutine_pipeline_clang", &error);
  REQUIRE(file);
  const std::optional<DieSections> real = DieSections::of(file->dwarf());
  REQUIRE(real);
  // Copies of the sections, each exactly its size (the sanitizer build then sees any read past one).
  std::vector<std::uint8_t> info(real->info.begin(), real->info.end());
  std::vector<std::uint8_t> abbrev(real->abbrev.begin(), real->abbrev.end());
  DieSections damaged = *real;
  damaged.info = info;
  damaged.abbrev = abbrev;
  const std::vector<DieScanner::Unit> units = DieScanner::units_of(file->dwarf(), *real);
  REQUIRE(!units.empty());
  // The DIEs read of `unit`, in order from its root; each takes at least a byte.
  auto dies_read = [&](const DieScanner::Unit& unit) {
    DieScanner scanner(damaged, unit, every_tag);
    std::string out;
    ScannedDie root;
    if (scanner.next(root)) scanner_walk(scanner, root, [](int) { return false; }, true, out);
    return static_cast<std::uint64_t>(std::count(out.begin(), out.end(), '\n'));
  };
  std::mt19937 random(19);
  const DieScanner::Unit& unit = units.front();
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<std::uint8_t>& bytes = trial % 3 == 2 ? abbrev : info;
    const std::size_t at = std::uniform_int_distribution<std::size_t>(0, bytes.size() - 1)(random);
    const std::uint8_t was = bytes[at];
    bytes[at] = static_cast<std::uint8_t>(trial % 2 ? 0xff : random());
    CHECK(dies_read(unit) <= unit.end - unit.root);
    bytes[at] = was;
  }
  SECTION("a unit cut short") {
    DieScanner::Unit cut = unit;
    for (std::uint64_t end = cut.root; end < unit.end; end += std::max<std::uint64_t>(1, (unit.end - cut.root) / 97)) {
      cut.end = end;
      CHECK(dies_read(cut) <= end - cut.root);
    }
  }
  SECTION("abbreviations past their section") {
    DieScanner::Unit lost = unit;
    lost.abbrev_offset = abbrev.size() + 5;
    DieScanner scanner(damaged, lost, every_tag);
    ScannedDie die;
    CHECK_FALSE(scanner.next(die));
    CHECK(scanner.failed());
  }
}

namespace {

void append_uleb(std::vector<std::uint8_t>& out, std::uint64_t value) {
  do {
    std::uint8_t byte = value & 0x7f;
    value >>= 7;
    out.push_back(static_cast<std::uint8_t>(value ? byte | 0x80 : byte));
  } while (value);
}

}  // namespace

// Abbreviation codes are any unsigned numbers. Producers number them from 1, but a code in the millions
// (a damaged table, a fuzzed one) must read as well, and cost one entry rather than a table that long.
TEST_CASE("the DIE scanner reads abbreviations of any code", "[dwarf]") {
  const std::uint64_t codes[] = {1, 4095, 4096, 3'000'000, std::uint64_t{1} << 40};
  for (const std::uint64_t code : codes) {
    INFO("code " << code);
    std::vector<std::uint8_t> abbrev;  // the unit's DIE: DW_TAG_compile_unit, no children, a DW_FORM_string name
    append_uleb(abbrev, code);
    append_uleb(abbrev, DW_TAG_compile_unit);
    abbrev.push_back(DW_CHILDREN_no);
    append_uleb(abbrev, DW_AT_name);
    append_uleb(abbrev, DW_FORM_string);
    abbrev.insert(abbrev.end(), {0, 0, 0});  // the attributes' end, then the table's
    std::vector<std::uint8_t> info = {0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 8};  // DWARF 4 header, length patched below
    const std::size_t root = info.size();
    append_uleb(info, code);
    for (const char c : std::string("unit.c")) info.push_back(static_cast<std::uint8_t>(c));
    info.push_back(0);
    info[0] = static_cast<std::uint8_t>(info.size() - 4);
    DieSections sections;
    sections.info = info;
    sections.abbrev = abbrev;
    DieScanner::Unit unit;
    unit.end = info.size();
    unit.root = root;
    unit.version = 4;
    DieScanner scanner(sections, unit, every_tag);
    ScannedDie die;
    REQUIRE(scanner.next(die));
    CHECK(die.tag == DW_TAG_compile_unit);
    CHECK(die.offset == root);
    REQUIRE(die.name);
    CHECK(std::string(die.name) == "unit.c");
    CHECK_FALSE(scanner.failed());
  }
}
