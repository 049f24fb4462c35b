#include "runtime/cpython/cpython_layout.h"

#include <algorithm>
#include <charconv>

namespace heapscope::cpython {

const Module* interpreter_module(const Image& image, const SymbolIndex& symbols) {
  for (const Module& m : image.modules())
    if (symbols.address_of(m, "PyObject_Malloc")) return &m;
  return nullptr;
}

bool has_type_named(const Image& image, Address object, std::string_view name) {
  const auto type = image.read_u64(object + kObType);
  const auto name_at = type ? image.read_u64(*type + kTpName) : std::nullopt;
  return name_at && image.read_c_string(*name_at, name.size() + 1) == name;
}

std::uint32_t str_header(int minor, std::uint32_t state) {
  const bool wstr = minor <= 11;
  if (!(state & kStrCompact)) return wstr ? 80 : 64;
  if (!(state & kStrAscii)) return wstr ? 72 : 56;
  return wstr ? 48 : 40;
}

std::optional<std::string> ascii_text(const Image& image, Address at, int minor, std::uint64_t longest) {
  std::uint64_t head[5] = {};  // refcount, type, length, hash, state
  if (!image.read_exact(at, head, sizeof head) || head[2] > longest) return std::nullopt;
  const auto state = static_cast<std::uint32_t>(head[kStrState / 8]);
  if (!(state & kStrCompact) || !(state & kStrAscii)) return std::nullopt;
  if (!has_type_named(image, at, "str")) return std::nullopt;
  std::string text(head[2], '\0');
  if (!image.read_exact(at + str_header(minor, state), text.data(), text.size())) return std::nullopt;
  if (!std::all_of(text.begin(), text.end(), [](char c) { return c >= ' ' && c < 0x7f; })) return std::nullopt;
  return text;
}

std::optional<StateLayout> state_layout(int minor) {
  switch (minor) {
    case 11: return StateLayout{296, 16, 160, {{{3872, 4512, "list"}, {4520, 5160, "dict"}, {5168, 5808, ""}}}};
    case 12: return StateLayout{232, 16, 144, {{{270072, 270712, "list"}, {270736, 272016, "dict"}, {271376, 272020, ""}}}};
    case 13: return StateLayout{232, 16, 160, {{{11208, 11848, "list"}, {11856, 12496, "dict"}, {12504, 13144, ""}}}};
    default: return std::nullopt;
  }
}

std::optional<InterpreterRelease> interpreter_release(const Image& image, const SymbolIndex& symbols, const Module& module) {
  if (const auto at = symbols.address_of(module, "Py_Version"))
    if (const auto hex = image.read_u64(*at); hex && (*hex >> 24 & 0xff) == 3)
      return InterpreterRelease{static_cast<int>(*hex >> 16 & 0xff), "Py_Version"};
  if (const auto minor = minor_from_name(module.name())) return InterpreterRelease{*minor, "file name"};
  return std::nullopt;
}

Address code_instructions_offset(int minor) { return minor == 11 ? 184 : minor == 12 ? 192 : minor == 13 ? 200 : 0; }

Address cached_keys_offset(int minor) { return minor == 11 ? 872 : minor == 12 || minor == 13 ? 880 : 0; }

std::optional<int> minor_from_name(std::string_view name) {
  const std::size_t at = name.find("python3.");
  if (at == std::string_view::npos) return std::nullopt;
  const std::string_view digits = name.substr(at + 8);
  int minor = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), minor);
  if (ec != std::errc() || end == digits.data()) return std::nullopt;
  return minor;
}

}  // namespace heapscope::cpython
