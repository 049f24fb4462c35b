#include "image/process_arguments.h"

#include <elf.h>

#include <algorithm>
#include <iterator>
#include <optional>
#include <vector>

namespace heapscope {

namespace {

// How far below the program's file name the search for the auxiliary vector looks: the environment's and
// the arguments' strings lie between them.
constexpr std::uint64_t kStackTopSearched = 256 * 1024;
constexpr std::size_t kLongestArgument = 4096;

// Where in `words` (the stack's top) the auxiliary vector starts: its first two entries.
std::optional<std::size_t> auxv_index(const std::vector<std::uint64_t>& words, const std::vector<AuxvEntry>& auxv) {
  if (auxv.size() < 2 || words.size() < 4) return std::nullopt;
  const std::uint64_t first[] = {auxv[0].type, auxv[0].value, auxv[1].type, auxv[1].value};
  for (std::size_t i = words.size() - std::size(first) + 1; i-- > 0;)  // from the top: the vector is near it
    if (std::equal(std::begin(first), std::end(first), words.begin() + static_cast<std::ptrdiff_t>(i))) return i;
  return std::nullopt;
}

// argv's pointers, found below the auxiliary vector at `auxv_at`: envp's pointers and null, then argv's and
// null, with argc before them.
std::vector<Address> argv_below(const std::vector<std::uint64_t>& words, std::size_t auxv_at, const MemoryRegion& stack) {
  std::size_t at = auxv_at;
  auto skip_pointers = [&] {
    std::size_t count = 0;
    while (at > 0 && words[at - 1] >= stack.start && words[at - 1] < stack.end) --at, ++count;
    return count;
  };
  if (at == 0 || words[--at] != 0) return {};  // envp's null
  skip_pointers();
  if (at == 0 || words[--at] != 0) return {};  // argv's null
  const std::size_t argc = skip_pointers();
  if (argc == 0 || at == 0 || words[at - 1] != argc) return {};
  return {words.begin() + static_cast<std::ptrdiff_t>(at), words.begin() + static_cast<std::ptrdiff_t>(at + argc)};
}

}  // namespace

std::string command_line_in_memory(const Image& image) {
  const auto execfn = auxv_lookup(image.auxv(), AT_EXECFN);
  const MemoryRegion* stack = execfn ? image.region_at(*execfn) : nullptr;
  if (!stack) return {};
  const Address base = std::max(stack->start, (*execfn - std::min(*execfn, kStackTopSearched)) & ~Address{7});
  std::vector<std::uint64_t> words((*execfn - base) / 8);
  words.resize(image.read(base, words.data(), words.size() * 8) / 8);
  const std::optional<std::size_t> auxv_at = auxv_index(words, image.auxv());
  if (!auxv_at) return {};
  std::string joined;
  for (const Address arg : argv_below(words, *auxv_at, *stack)) {
    std::string text(kLongestArgument, '\0');
    text.resize(image.read(arg, text.data(), text.size()));
    joined += (joined.empty() ? "" : " ") + text.substr(0, text.find('\0'));
  }
  return joined;
}

}  // namespace heapscope
