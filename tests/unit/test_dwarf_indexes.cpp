// DwarfIndexes: a session's DWARF type index per module, built once and shared by its namings, also when a
// thread loading them ahead and one typing blocks ask for the same module at once.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <atomic>
#include <thread>

#include "fake_image.h"
#include "types/dwarf_typing.h"

using namespace heapscope;
using heapscope::testing::FakeImage;

namespace {

// A structure this test program defines, for its DWARF to hold.
constexpr std::uint64_t kIndexedByTheTestLine = __LINE__ + 1;
struct IndexedByTheTest {
  IndexedByTheTest* next;
  long payload;
};
[[maybe_unused]] IndexedByTheTest g_indexed_by_the_test{nullptr, 42};

// An image whose one module is this test program (built with debug information), as a file on disk.
class ProgramImage : public FakeImage {
 public:
  ProgramImage() {
    char path[4096] = {};
    const ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    REQUIRE(n > 0);
    Module m;
    m.path = m.file_on_disk = std::string(path, static_cast<std::size_t>(n));
    m.is_main_executable = true;
    module_list.push_back(m);
  }
  const std::vector<Module>& modules() const override { return module_list; }
  std::vector<Module> module_list;
};

}  // namespace

TEST_CASE("a module's DWARF index is built once, for every thread that asks") {
  const ProgramImage image;
  const SymbolIndex symbols(image, {});
  DwarfIndexes indexes(image, symbols);
  const DwarfTypeIndex* from_other_thread = nullptr;
  std::thread other([&] { from_other_thread = indexes.index(0); });
  const DwarfTypeIndex* here = indexes.index(0);
  other.join();
  REQUIRE(here != nullptr);
  CHECK(from_other_thread == here);
  const DwarfTypeId indexed = here->find_structure("(anonymous namespace)::IndexedByTheTest");
  REQUIRE(indexed != kNoDwarfType);
  // Where it was declared is read when asked, from the unit's line table.
  CHECK(here->declared(indexed).describe() == "test_dwarf_indexes.cpp:" + std::to_string(kIndexedByTheTestLine));
  const DwarfType& payload = here->type(here->members(indexed)[1].type);
  CHECK(payload.kind == DwarfType::Kind::base);
  CHECK(here->declared(here->members(indexed)[1].type).file.empty());  // a base type has no declaration
  CHECK(here->declared(kNoDwarfType).file.empty());
  CHECK(indexes.index(1) == nullptr);  // no such module
}

TEST_CASE("namings over a session's indexes share them, and loading ahead stops when told") {
  const ProgramImage image;
  const SymbolIndex symbols(image, {});
  const auto indexes = std::make_shared<const DwarfIndexes>(image, symbols);
  const std::atomic<bool> stop{true};
  indexes->load_all(stop);  // told to stop before the first module: it builds nothing, and no harm done
  const DwarfTypes first(indexes), second(indexes);
  REQUIRE(first.index(0) != nullptr);
  CHECK(second.index(0) == first.index(0));
  // A naming with indexes of its own builds its own.
  const DwarfTypes alone(image, symbols);
  REQUIRE(alone.index(0) != nullptr);
  CHECK(alone.index(0) != first.index(0));
}
