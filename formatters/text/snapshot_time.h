// Capture times of snapshots as people read them, for the text and SVG renderers.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <ctime>
#include <string>

namespace heapscope::text {

// 1795337200123456789 → "2026-11-22 08:46:40.123 UTC".
inline std::string capture_time(std::int64_t ns) {
  const std::time_t seconds = static_cast<std::time_t>(ns / 1'000'000'000);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S", &utc);
  return fmt::format("{}.{:03} UTC", date, (ns % 1'000'000'000) / 1'000'000);
}

// "+1.5 KiB", "-24 B", "0 B".
template <typename BytesFn>
std::string signed_amount(std::int64_t n, BytesFn bytes) {
  const std::uint64_t magnitude = n < 0 ? static_cast<std::uint64_t>(-(n + 1)) + 1 : static_cast<std::uint64_t>(n);
  return (n > 0 ? "+" : n < 0 ? "-" : "") + bytes(magnitude);
}

}  // namespace heapscope::text
