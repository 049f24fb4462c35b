// The process's arguments read from its first stack (image/process_arguments), as the kernel lays it out:
// argc, argv's pointers and null, envp's and null, the auxiliary vector, then the strings, the program's
// file name (AT_EXECFN) last.
#include <catch2/catch.hpp>

#include <elf.h>

#include <cstring>
#include <string_view>
#include <vector>

#include "fake_image.h"
#include "image/process_arguments.h"

using namespace heapscope;
using heapscope::testing::FakeImage;

namespace {

constexpr Address kStack = 0x7ffffffde000;
constexpr Address kVectors = kStack + 0x100;  // argc, then the pointer arrays and the auxiliary vector
constexpr Address kStrings = kStack + 0x800;

// A fake image whose auxiliary vector a test sets.
struct StackImage : FakeImage {
  std::vector<AuxvEntry> entries;
  const std::vector<AuxvEntry>& auxv() const override { return entries; }
};

class StackBuilder {
 public:
  StackBuilder() { image_.add_region(kStack, 0x1000); }

  // The strings from kStrings up, then the words from kVectors up: argc, argv, null, envp, null, auxv.
  StackImage& build(const std::vector<std::string_view>& args, const std::vector<std::string_view>& env,
                    std::uint64_t argc) {
    std::vector<std::uint64_t> words{argc};
    for (std::string_view a : args) words.push_back(text(a));
    words.push_back(0);
    for (std::string_view e : env) words.push_back(text(e));
    words.push_back(0);
    const Address execfn = text(args.empty() ? "prog" : args.front());
    image_.entries = {{AT_PAGESZ, 4096}, {AT_EXECFN, execfn}, {AT_NULL, 0}};
    for (const AuxvEntry& entry : image_.entries) {
      words.push_back(entry.type);
      words.push_back(entry.value);
    }
    for (std::size_t i = 0; i < words.size(); ++i) image_.put(kVectors + 8 * i, words[i]);
    image_.entries.pop_back();  // Image::auxv() lists the entries before AT_NULL
    return image_;
  }

 private:
  // Puts `s` and its NUL at the next free place among the strings; returns where.
  Address text(std::string_view s) {
    const Address at = next_;
    std::vector<char> bytes(s.begin(), s.end());
    bytes.resize((bytes.size() + 1 + 7) / 8 * 8, '\0');
    for (std::size_t i = 0; i < bytes.size(); i += 8) {
      std::uint64_t word;
      std::memcpy(&word, bytes.data() + i, 8);
      image_.put(at + i, word);
    }
    next_ += bytes.size();
    return at;
  }

  StackImage image_;
  Address next_ = kStrings;
};

}  // namespace

TEST_CASE("process arguments: argv below the environment and the auxiliary vector, joined by spaces") {
  StackBuilder stack;
  const StackImage& image =
      stack.build({"./redis-server", "127.0.0.1:6379", "--port", "7000"}, {"HOME=/root", "TERM=xterm"}, 4);
  CHECK(command_line_in_memory(image) == "./redis-server 127.0.0.1:6379 --port 7000");
}

TEST_CASE("process arguments: none when argc does not count argv's pointers") {
  StackBuilder stack;
  CHECK(command_line_in_memory(stack.build({"./server", "--port"}, {"HOME=/root"}, 3)).empty());
}

TEST_CASE("process arguments: none without the program's file name in the auxiliary vector") {
  StackBuilder stack;
  StackImage& image = stack.build({"./server"}, {}, 1);
  image.entries = {{AT_PAGESZ, 4096}, {AT_ENTRY, 0x401000}};
  CHECK(command_line_in_memory(image).empty());
}
