// glibc's exit handler lists over hand-made memory: pointer demangling, parsing one exit_function_list,
// and finding the statically allocated list (`initial`) by signature when libc has no symbols.
#include <catch2/catch.hpp>

#include "fake_image.h"
#include "runtime/glibc/glibc_finalizers.h"

using namespace heapscope;
using heapscope::testing::FakeImage;

namespace {

constexpr std::uint64_t kGuard = 0x1122334455667788;
constexpr Address kCode = 0x400000;   // an executable module's text
constexpr Address kData = 0x600000;   // writable data holding the list
constexpr Address kList = kData + 0x100;
constexpr std::uint64_t ef_on = 2, ef_at = 3, ef_cxa = 4;

// Entry i of the exit_function_list at `list`: {flavor, fn (mangled), arg, dso_handle}.
void put_entry(FakeImage& image, Address list, int i, std::uint64_t flavor, Address fn, Address arg) {
  const Address e = list + 16 + 32 * static_cast<Address>(i);
  image.put(e, flavor);
  image.put(e + 8, mangle_pointer(fn, kGuard));
  image.put(e + 16, arg);
}

FakeImage image_with_list() {
  FakeImage image;
  image.add_code(kCode, 0x1000, "/usr/bin/server");
  image.add_region(kData, 0x2000);
  image.put(kList, 0);  // next: the last list
  image.put(kList + 8, 4);
  put_entry(image, kList, 0, ef_cxa, kCode + 0x10, 0x7000);  // __cxa_atexit(fn, 0x7000, dso)
  put_entry(image, kList, 1, ef_on, kCode + 0x20, 0x7100);   // on_exit(fn, 0x7100)
  put_entry(image, kList, 2, ef_cxa, kCode + 0x30, 0);       // atexit(fn), as glibc 2.36 registers it
  put_entry(image, kList, 3, ef_at, kCode + 0x40, 0);        // the old ef_at flavor
  return image;
}

}  // namespace

TEST_CASE("pointer guard mangling is xor then rotate left by 0x11") {
  CHECK(mangle_pointer(0x401000, kGuard) == 0x6688aa4ccf102244);
  CHECK(demangle_pointer(0x6688aa4ccf102244, kGuard) == 0x401000);
  CHECK(demangle_pointer(mangle_pointer(0xdeadbeef, 7), 7) == 0xdeadbeef);
}

TEST_CASE("an exit_function_list gives each handler's kind, function and argument slot") {
  const FakeImage image = image_with_list();
  const auto list = read_exit_function_list(image, kList, kGuard);
  REQUIRE(list);
  CHECK(list->next == 0);
  REQUIRE(list->registrations.size() == 4);
  const auto& r = list->registrations;
  CHECK(r[0].kind == FinalizerKind::cxa_atexit);
  CHECK(r[0].function == kCode + 0x10);
  CHECK(r[0].object == 0x7000);
  CHECK(r[0].slot_start == kList + 16 + 16);
  CHECK(r[0].slot_end == r[0].slot_start + 8);
  CHECK(r[1].kind == FinalizerKind::on_exit);
  CHECK(r[1].object == 0x7100);
  CHECK(r[1].slot_start == kList + 16 + 32 + 16);
  CHECK(r[2].kind == FinalizerKind::atexit);
  CHECK(r[2].slot_start == r[2].slot_end);  // holds nothing
  CHECK(r[3].kind == FinalizerKind::atexit);
  CHECK(r[3].function == kCode + 0x40);
}

TEST_CASE("a list that is not glibc's is rejected") {
  FakeImage image = image_with_list();
  SECTION("more entries than a list has") { image.put(kList + 8, 33); }
  SECTION("a flavor glibc does not have") { image.put(kList + 16 + 32, 9); }
  SECTION("a handler outside every module's code") { put_entry(image, kList, 1, ef_on, kData + 0x40, 0x7100); }
  SECTION("a handler mangled with another guard") { image.put(kList + 16 + 8, mangle_pointer(kCode + 0x10, 1)); }
  CHECK_FALSE(read_exit_function_list(image, kList, kGuard));
}

TEST_CASE("the static list is found by signature, and only when one list fits") {
  FakeImage image = image_with_list();
  CHECK(find_initial_exit_list(image, kData, kData + 0x2000, kGuard) == kList);
  SECTION("zeroed memory holds no list") {
    image.put(kList + 8, 0);
    CHECK_FALSE(find_initial_exit_list(image, kData, kData + 0x2000, kGuard));
  }
  SECTION("two candidates are ambiguous") {
    const Address second = kData + 0x800;
    image.put(second + 8, 1);
    put_entry(image, second, 0, ef_cxa, kCode + 0x10, 0x7000);
    CHECK_FALSE(find_initial_exit_list(image, kData, kData + 0x2000, kGuard));
  }
}
