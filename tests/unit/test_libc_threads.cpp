// glibc's thread lists (runtime/glibc/glibc_threads), read from memory and symbol addresses alone: the one
// reader the session and the LLDB frontend (for thread pointers) share.
#include <catch2/catch.hpp>

#include <map>
#include <string>

#include "fake_image.h"
#include "runtime/builtin/builtin_runtimes.h"

using namespace heapscope;
using heapscope::testing::FakeImage;

namespace {

constexpr Address kLibcData = 0x7f0000001000;   // the _thread_db_* descriptors
constexpr Address kRtldGlobal = 0x7f0000002000;  // ld.so's _rtld_global
constexpr Address kStacks = 0x7f0000100000;      // thread descriptors
constexpr std::uint32_t kUsed = 0x10, kUser = 0x20;  // list heads in _rtld_global (cache follows user)
constexpr std::uint32_t kListOffset = 0x2c0, kTidOffset = 0x2d0, kPthreadSize = 0x900;

struct ThreadLists {
  FakeImage image;
  std::map<std::string, Address> symbols;

  ThreadLists() {
    image.add_region(kLibcData, 0x1000);
    image.add_region(kRtldGlobal, 0x1000);
    image.add_region(kStacks, 0x10000);
    descriptor("_thread_db_rtld_global__dl_stack_used", 128, kUsed, 0);
    descriptor("_thread_db_rtld_global__dl_stack_user", 128, kUser, 1);
    descriptor("_thread_db_pthread_list", 128, kListOffset, 2);
    descriptor("_thread_db_pthread_tid", 32, kTidOffset, 3);
    symbols["_thread_db_sizeof_pthread"] = kLibcData + 0x100;
    image.put(kLibcData + 0x100, kPthreadSize);
    symbols["_rtld_global"] = kRtldGlobal;
    for (std::uint32_t head : {kUsed, kUser, kUser + 16}) link({}, kRtldGlobal + head);
  }
  void descriptor(const std::string& name, std::uint32_t bits, std::uint32_t offset, int slot) {
    const Address at = kLibcData + 16 * slot;
    symbols[name] = at;
    image.put(at, bits);                                   // {bits, count}
    image.put(at + 8, offset);                             // {offset, padding}
  }
  // A circular list_t at `head` through the descriptors' `list` fields.
  void link(const std::vector<Address>& descriptors, Address head) {
    Address prev = head;
    for (Address d : descriptors) {
      image.put(prev, d + kListOffset);
      image.put(d + kListOffset + 8, prev);
      prev = d + kListOffset;
    }
    image.put(prev, head);
    image.put(head + 8, prev);
  }
  Address thread(int i, std::uint32_t tid) {
    const Address d = kStacks + 0x1000 * i;
    image.put(d + kTidOffset, tid);
    return d;
  }
  LibcThreads read() {
    return read_libc_threads(memory_reader_for(image), [&](std::string_view, std::string_view name) {
      const auto it = symbols.find(std::string(name));
      return it == symbols.end() ? std::nullopt : std::optional<Address>(it->second);
    });
  }
};

}  // namespace

TEST_CASE("libc threads: the used, user and cache lists, live and exited") {
  ThreadLists t;
  const Address main_thread = t.thread(0, 100), worker = t.thread(1, 101), exited = t.thread(2, 0),
                cached = t.thread(3, 0);
  t.link({main_thread}, kRtldGlobal + kUser);
  t.link({worker, exited}, kRtldGlobal + kUsed);
  t.link({cached}, kRtldGlobal + kUser + 16);
  const LibcThreads found = t.read();
  CHECK(found.warnings.empty());
  CHECK(found.descriptor_size == kPthreadSize);
  REQUIRE(found.threads.size() == 4);
  std::map<Address, LibcThread> by_descriptor;
  for (const LibcThread& th : found.threads) by_descriptor[th.descriptor] = th;
  CHECK(by_descriptor[main_thread].tid == 100);
  CHECK(by_descriptor[main_thread].list == LibcThread::List::user);
  CHECK_FALSE(by_descriptor[main_thread].exited());
  CHECK(by_descriptor[worker].tid == 101);
  CHECK(by_descriptor[exited].exited());
  CHECK(by_descriptor[cached].list == LibcThread::List::cache);
}

TEST_CASE("libc threads: a damaged list and a descriptor of the wrong size are said, not followed") {
  ThreadLists t;
  const Address a = t.thread(0, 100), b = t.thread(1, 101);
  t.link({a, b}, kRtldGlobal + kUsed);
  t.image.put(b + kListOffset + 8, 0x1234);  // b's back link no longer points at a
  LibcThreads found = t.read();
  CHECK(found.threads.empty());
  REQUIRE(found.warnings.size() == 1);
  CHECK_THAT(found.warnings[0], Catch::Contains("is damaged"));

  ThreadLists wrong;
  wrong.descriptor("_thread_db_pthread_tid", 64, kTidOffset, 3);  // not a pid_t: another layout
  found = wrong.read();
  CHECK(found.threads.empty());
  REQUIRE(found.warnings.size() == 1);
  CHECK_THAT(found.warnings[0], Catch::Contains("cannot be located"));
}
