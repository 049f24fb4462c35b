#include "sources/process_identity.h"

#include <fmt/format.h>

#include <elf.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <vector>

namespace heapscope {

namespace {

constexpr std::size_t kPrpsinfoPidOffset = 24;
constexpr std::size_t kPrpsinfoFnameOffset = 40;
constexpr std::size_t kPrpsinfoFnameSize = 16;
constexpr std::size_t kPrpsinfoPsargsOffset = 56;
constexpr std::size_t kPrpsinfoPsargsSize = 80;

// The NUL-terminated text of at most `size` bytes at `offset`.
std::string_view text_at(std::span<const std::byte> desc, std::size_t offset, std::size_t size) {
  const char* text = reinterpret_cast<const char*>(desc.data() + offset);
  return {text, strnlen(text, size)};
}

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

std::string process_identity(const Image& image, std::string_view command_line, std::string_view short_name) {
  std::string identity(!command_line.empty() ? command_line : short_name);
  if (const Module* exe = image.main_executable(); exe && !exe->path.empty())
    identity += fmt::format("{}executable {}", identity.empty() ? "" : "; ", exe->path);
  return identity.empty() ? "?" : identity;
}

std::string joined_arguments(std::string_view nul_separated) {
  constexpr std::string_view kSeparators("\0 ", 2);  // the kernel's NT_PRPSINFO has them as spaces already
  std::string joined(nul_separated.substr(0, nul_separated.find_last_not_of(kSeparators) + 1));
  std::replace(joined.begin(), joined.end(), '\0', ' ');
  return joined;
}

std::optional<ProcessNote> decode_process_note(std::span<const std::byte> desc) {
  if (desc.size() < kPrpsinfoFnameOffset + kPrpsinfoFnameSize) return std::nullopt;
  ProcessNote note;
  std::uint32_t pid;
  std::memcpy(&pid, desc.data() + kPrpsinfoPidOffset, sizeof pid);
  note.pid = static_cast<int>(pid);
  note.name = text_at(desc, kPrpsinfoFnameOffset, kPrpsinfoFnameSize);
  if (desc.size() >= kPrpsinfoPsargsOffset + kPrpsinfoPsargsSize)
    note.command_line = joined_arguments(text_at(desc, kPrpsinfoPsargsOffset, kPrpsinfoPsargsSize));
  return note;
}

std::optional<ProcessNote> core_process_note(const ElfFile& core) {
  std::optional<ProcessNote> found;
  for (const GElf_Phdr& ph : core.program_headers()) {
    if (ph.p_type != PT_NOTE || found) continue;
    for_each_note(core.file_range(ph.p_offset, ph.p_filesz), [&](const ElfNote& note) {
      if (!found && note.name == "CORE" && note.type == NT_PRPSINFO) found = decode_process_note(note.desc);
    });
  }
  return found;
}

}  // namespace heapscope
