#include "sources/process_identity.h"

#include <fmt/format.h>

#include <elf.h>

#include <algorithm>
#include <cstring>

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

}  // namespace

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
