// Stack unwinding over an Image (engine/frames) and stack root labels that name frames.
#include <link.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <random>

#include "fake_image.h"
#include "frames/unwind.h"
#include "model/roots.h"

using namespace heapscope;
using heapscope::testing::FakeImage;

namespace {

constexpr Address kStack = 0x7ff000000000;
constexpr std::size_t kStackSize = 0x10000;

// A FakeImage whose threads carry full register sets and whose modules are given by the test.
class UnwindImage : public FakeImage {
 public:
  std::vector<ThreadState> thread_states;
  std::vector<Module> module_list;
  const std::vector<ThreadState>& threads() const override { return thread_states; }
  const std::vector<Module>& modules() const override { return module_list; }
};

int first_object_bias(dl_phdr_info* info, std::size_t, void* out) {
  *static_cast<Address*>(out) = info->dlpi_addr;
  return 1;  // the first object is the main program
}

// This test program as a module of the image, at its real load bias, so its CFI describes real code.
Module this_program() {
  Module m;
  char path[4096] = {};
  const ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  REQUIRE(n > 0);
  m.path = m.file_on_disk = std::string(path, static_cast<std::size_t>(n));
  dl_iterate_phdr(first_object_bias, &m.load_bias);
  m.is_main_executable = true;
  return m;
}

ThreadState thread_at(Address rip, Address rsp, Address rbp) {
  ThreadState t;
  t.tid = 42;
  t.regs[static_cast<int>(Reg::rip)] = rip;
  t.regs[static_cast<int>(Reg::rsp)] = rsp;
  t.regs[static_cast<int>(Reg::rbp)] = rbp;
  return t;
}

__attribute__((noinline)) int some_code(int x) { return x * 3 + 1; }

Frame frame(Address low, Address high, std::string function, std::string file, int line) {
  Frame f;
  f.sp_low = low;
  f.sp_high = high;
  f.function = std::move(function);
  f.file = std::move(file);
  f.line = line;
  return f;
}

}  // namespace

TEST_CASE("a stack word is labelled by the frame that holds it") {
  UnwindImage image;
  image.add_region(kStack, kStackSize);
  image.thread_states = {thread_at(0, kStack + 0x100, 0), thread_at(0, kStack + 0x8000, 0)};
  image.thread_states[1].tid = 4711;
  SymbolIndex symbols(image, SymbolSearchOptions{});
  RootRange root;
  root.kind = RootKind::stack;
  root.thread = 1;
  root.anchor = kStack + 0x8000;
  root.start = root.anchor;
  root.end = kStack + kStackSize;

  std::vector<std::vector<Frame>> frames(2);
  frames[1].push_back(frame(kStack + 0x8000, kStack + 0x8040, "pause", "", 0));
  frames[1].push_back(frame(kStack + 0x8040, kStack + 0x8100, "process_batch", "/src/app/worker.cpp", 88));
  frames[1][1].variables.push_back({"batch", kStack + 0x8050, kStack + 0x8058});

  CHECK(describe_root(image, symbols, root, kStack + 0x8050, &frames) ==
        "stack of thread 2 (tid 4711) frame #1 process_batch() at worker.cpp:88 variable batch (sp+0x50)");
  CHECK(describe_root(image, symbols, root, kStack + 0x8048, &frames) ==
        "stack of thread 2 (tid 4711) frame #1 process_batch() at worker.cpp:88 (sp+0x48)");
  CHECK(describe_root(image, symbols, root, kStack + 0x8008, &frames) ==
        "stack of thread 2 (tid 4711) frame #0 pause() (sp+0x8)");
  // Beyond the unwound frames, and without frames at all: the plain label.
  CHECK(describe_root(image, symbols, root, kStack + 0x8200, &frames) == "stack of thread 2 (tid 4711), sp+0x200");
  CHECK(describe_root(image, symbols, root, kStack + 0x8050) == "stack of thread 2 (tid 4711), sp+0x50");
}

TEST_CASE("without any usable module nothing is unwound and the reason is a warning") {
  UnwindImage image;
  image.add_region(kStack, kStackSize);
  image.thread_states = {thread_at(0x401000, kStack + 0x100, 0)};
  SymbolIndex symbols(image, SymbolSearchOptions{});
  const DwarfFiles dwarf(image, symbols);
  std::vector<std::string> warnings;
  const auto frames = unwind_threads(image, symbols, dwarf, &warnings);
  REQUIRE(frames.size() == 1);
  CHECK(frames[0].empty());
  CHECK_FALSE(warnings.empty());
}

TEST_CASE("garbage stacks end the unwind, bounded, with frames that only go up the stack") {
  UnwindImage image;
  image.add_region(kStack, kStackSize);
  const Module program = this_program();
  image.module_list = {program};
  const Address code = reinterpret_cast<Address>(&some_code);
  std::mt19937_64 random(7);
  std::size_t deepest = 0;
  for (int round = 0; round < 20; ++round) {
    // Words that look like stack addresses, code addresses and noise.
    for (Address a = kStack; a < kStack + kStackSize; a += 8) {
      const std::uint64_t r = random();
      image.put(a, r % 3 == 0 ? kStack + r % kStackSize : r % 3 == 1 ? code + r % 0x4000 - 0x2000 : r);
    }
    image.thread_states = {thread_at(code, kStack + 0x100 + 8 * (random() % 0x1000),
                                     kStack + 8 * (random() % 0x1800)),
                           thread_at(random(), random(), random())};
    SymbolIndex symbols(image, SymbolSearchOptions{});
    const DwarfFiles dwarf(image, symbols);
    std::vector<std::string> warnings;
    const auto frames = unwind_threads(image, symbols, dwarf, &warnings);
    REQUIRE(frames.size() == 2);
    for (const auto& thread : frames) {
      CHECK(thread.size() <= kMaxFramesPerThread);
      deepest = std::max(deepest, thread.size());
      for (std::size_t i = 0; i + 1 < thread.size(); ++i) {
        CHECK(thread[i].sp_low <= thread[i].sp_high);
        CHECK(thread[i].sp_high == thread[i + 1].sp_low);
      }
    }
    // The first thread starts in real code: its innermost frame is named from the program's symbols.
    REQUIRE_FALSE(frames[0].empty());
    INFO("innermost function: " << frames[0][0].function);
    CHECK(frames[0][0].function.find("some_code") != std::string::npos);
  }
  // some_code's CFI takes the return address from the garbage: the unwind did walk into it.
  CHECK(deepest >= 2);
}
