#include "runtime/cpython/cpython_layout.h"

#include <charconv>

namespace heapscope::cpython {

bool has_type_named(const Image& image, Address object, std::string_view name) {
  const auto type = image.read_u64(object + kObType);
  const auto name_at = type ? image.read_u64(*type + kTpName) : std::nullopt;
  return name_at && image.read_c_string(*name_at, name.size() + 1) == name;
}

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
