// DieFacts (dwarf/die_facts.h) answers what the type index asks of a DIE as libdw's integrating readers do
// — the DIE's own attribute, else its abstract origin's or specification's, along the chain — for every
// DIE of three producers' DWARF: libc6-dbg (GCC, C, inlined functions' concrete instances everywhere), a
// C++ fixture built by GCC (member functions defined outside their classes), the same built by Clang.
#include <catch2/catch.hpp>
#include <dwarf.h>

#include <string>

#include "dwarf/die_facts.h"
#include "dwarf/dwarf_file.h"
#include "libc_debug_file.h"
#include "scanned_file.h"

using namespace heapscope;

namespace {

bool every_tag(int) { return true; }
bool variables_and_functions(int tag) {
  return tag == DW_TAG_compile_unit || tag == DW_TAG_variable || tag == DW_TAG_subprogram;
}

std::uint64_t libdw_reference(Dwarf_Die& die, int attribute) {
  std::optional<Dwarf_Die> target = die_reference(die, attribute);
  return target ? dwarf_dieoffset(&*target) : 0;
}

std::string location(const std::optional<StaticLocation>& where) {
  return where ? (where->tls ? "tls+" : "") + std::to_string(where->address) : "-";
}

// Every DIE's facts as libdw reads them: with `reads` filtering, the scanner asks libdw about an origin
// whose tag it does not read.
void check_facts_as_libdw(const std::string& path, DieScanner::TagFilter reads) {
  INFO(path);
  const heapscope::testing::ScannedFile file(path);
  std::size_t integrated = 0;
  file.for_each_die(reads, [&](DieScanner& scanner, const DieScanner::Unit& unit, const ScannedDie& die) {
    if (!reads(die.tag)) return;
    Dwarf_Die libdw;
    REQUIRE(dwarf_offdie(file.dwarf(), die.offset, &libdw));
    const DieFacts facts(die, scanner, file.dwarf());
    INFO("DIE " << die.offset);
    CHECK(facts.name() == die_name(libdw));
    CHECK(facts.declaration() == die_flag(libdw, DW_AT_declaration));
    CHECK(facts.specification() == libdw_reference(libdw, DW_AT_specification));
    CHECK(facts.type() == libdw_reference(libdw, DW_AT_type));
    CHECK(facts.byte_size() == die_udata(libdw, DW_AT_byte_size));
    if (die.tag == DW_TAG_compile_unit) CHECK(facts.language() == dwarf_srclang(&libdw));
    Dwarf_Attribute attr;
    Dwarf_Block block;
    const std::optional<StaticLocation> own =
        dwarf_attr(&libdw, DW_AT_location, &attr) && dwarf_formblock(&attr, &block) == 0
            ? static_location({block.data, block.length}, unit.address_size)
            : std::nullopt;
    CHECK(location(facts.location()) == location(own));
    integrated += die.origin != 0;
  });
  CHECK(integrated > 100);
}

}  // namespace

TEST_CASE("a scanned DIE's facts are libdw's, through its origins", "[dwarf]") {
  SECTION("libc6-dbg") { check_facts_as_libdw(heapscope::testing::libc_debug_file(), every_tag); }
  SECTION("libc6-dbg, origins of unread tags left to libdw") {
    check_facts_as_libdw(heapscope::testing::libc_debug_file(), variables_and_functions);
  }
  SECTION("a fixture built by GCC") { check_facts_as_libdw(HEAPSCOPE_FIXTURE_DIR "/coroutine_pipeline", every_tag); }
  SECTION("a fixture built by Clang") {
    check_facts_as_libdw(HEAPSCOPE_FIXTURE_DIR "/coroutine_pipeline_clang", every_tag);
  }
}
