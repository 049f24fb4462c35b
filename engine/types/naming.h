// How a block got its name — the evidence behind it, most reliable first. Reports carry it next to every
// name (JSON "naming"), and an inferred name is marked in the name itself ("AuditRecord?") so that no
// report, in any format, presents a guess as certain or counts guessed blocks with certain ones.
#pragma once

#include <cstdint>
#include <string_view>

namespace heapscope {

enum class Naming : std::uint8_t {
  none,      // nothing names it: "unknown (N bytes)"
  dwarf,     // DWARF types along pointers from a typed root, or from a block typed by certain evidence
  symbol,    // a symbol: "vtable for X", a std::function manager, a coroutine's resume function
  runtime,   // a language runtime's own type object: a CPython object's ob_type → tp_name ("str", "Order")
  rtti,      // a stripped binary's vtable → its type_info → the mangled class name
  vtable,    // -fno-rtti: grouped by its vtable's address ("class with vtable app+0x…")
  pattern,   // a libstdc++ layout recognised without debug info (a std::string body, ...)
  inferred,  // layout inference: the one DWARF structure whose layout fits the block (marked "T?")
  content,   // what the bytes are: NUL-terminated text, an array of pointers, all zeros
};

inline constexpr std::size_t kNamingCount = 9;

constexpr std::string_view naming_name(Naming n) {
  switch (n) {
    case Naming::dwarf: return "dwarf";
    case Naming::symbol: return "symbol";
    case Naming::runtime: return "runtime";
    case Naming::rtti: return "rtti";
    case Naming::vtable: return "vtable";
    case Naming::pattern: return "pattern";
    case Naming::inferred: return "inferred";
    case Naming::content: return "content";
    case Naming::none: break;
  }
  return "none";
}

// The mark an inferred name carries in every report ("AuditRecord?").
inline constexpr std::string_view kInferredMark = "?";

}  // namespace heapscope
