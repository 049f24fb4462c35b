// collect_roots on hand-made images: which memory becomes which kind of root.
#include <catch2/catch.hpp>

#include <algorithm>

#include "fake_image.h"
#include "model/roots.h"

using namespace heapscope;
using namespace heapscope::testing;

namespace {

constexpr Address kStack = 0x7ffff7000000;  // a pthread's stack mapping
constexpr std::size_t kStackSize = 0x10000;
constexpr Address kStackEnd = kStack + kStackSize;
constexpr Address kThreadPointer = kStackEnd - 0x900;  // its descriptor, near the top of the mapping
constexpr Address kSp = kStack + 0x8000;
constexpr Address kStaticTls = kThreadPointer - 0x40;  // the executable's static TLS block, below it
constexpr Address kDtv = 0x555555570000;              // malloc'ed in the process: any readable memory here

std::vector<RootRange> thread_roots(const RootSet& roots, RootKind kind) {
  std::vector<RootRange> out;
  std::copy_if(roots.ranges.begin(), roots.ranges.end(), std::back_inserter(out),
               [&](const RootRange& r) { return r.kind == kind && r.thread == 0; });
  return out;
}

// A worker thread whose DTV names one static TLS block at kStaticTls (to_free null: static, not malloc'ed).
FakeImage worker_image() {
  FakeImage image;
  image.add_region(kStack, kStackSize);
  image.add_region(kDtv - 16, 0x100);
  image.add_thread(7, kThreadPointer, kSp);
  image.put(kThreadPointer + 8, kDtv);  // tcbhead_t.dtv
  image.put(kDtv - 16, 1);              // dtv[-1]: its length
  image.put(kDtv + 16, kStaticTls);     // dtv[1] = {val, to_free}
  image.put(kDtv + 24, 0);
  return image;
}

}  // namespace

TEST_CASE("roots: a pthread's static TLS at the top of its stack mapping is its tls root, not stack") {
  const FakeImage image = worker_image();
  const RootSet roots = collect_roots(image, HeapModel{}, LibcThreads{}, LibcFinalizers{});

  const std::vector<RootRange> stack = thread_roots(roots, RootKind::stack);
  REQUIRE(stack.size() == 1);
  CHECK(stack[0].start == kSp - 128);  // the red zone below the stack pointer
  CHECK(stack[0].end == kStaticTls);
  const std::vector<RootRange> tls = thread_roots(roots, RootKind::tls);
  REQUIRE(tls.size() == 1);
  CHECK(tls[0].start == kStaticTls);
  CHECK(tls[0].end == kStackEnd);  // the descriptor above the thread pointer too
}

TEST_CASE("roots: without a readable DTV a pthread's TLS root starts at its thread pointer") {
  FakeImage image = worker_image();
  image.put(kThreadPointer + 8, 0);  // no DTV
  const RootSet roots = collect_roots(image, HeapModel{}, LibcThreads{}, LibcFinalizers{});
  const std::vector<RootRange> stack = thread_roots(roots, RootKind::stack);
  const std::vector<RootRange> tls = thread_roots(roots, RootKind::tls);
  REQUIRE(stack.size() == 1);
  REQUIRE(tls.size() == 1);
  CHECK(stack[0].end == kThreadPointer);
  CHECK(tls[0].start == kThreadPointer);
  CHECK(tls[0].end == kStackEnd);
}

TEST_CASE("roots: a thread whose thread pointer lies outside its stack keeps its whole stack") {
  FakeImage image;
  image.add_region(kStack, kStackSize);
  image.add_region(kDtv - 16, 0x100);  // the main thread's TLS: memory ld.so allocated
  image.add_thread(7, kDtv, kSp);
  const RootSet roots = collect_roots(image, HeapModel{}, LibcThreads{}, LibcFinalizers{});
  const std::vector<RootRange> stack = thread_roots(roots, RootKind::stack);
  REQUIRE(stack.size() == 1);
  CHECK(stack[0].end == kStackEnd);
  const std::vector<RootRange> tls = thread_roots(roots, RootKind::tls);
  REQUIRE(tls.size() == 1);
  CHECK(tls[0].start == kDtv - 16);
}
