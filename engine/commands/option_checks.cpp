#include "commands/option_checks.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

namespace heapscope {

CLI::Validator whole_number(std::uint64_t minimum) {
  const std::string wanted = minimum == 0 ? "a whole number (0 or more)" : fmt::format("a whole number of at least {}", minimum);
  return CLI::Validator(
      [minimum, wanted](std::string& input) -> std::string {
        std::uint64_t value = 0;
        const char* end = input.data() + input.size();
        const auto [stop, error] = std::from_chars(input.data(), end, value);
        if (input.empty() || error == std::errc::invalid_argument || stop != end)
          return fmt::format("'{}' is not {}", input, wanted);
        if (error == std::errc::result_out_of_range) return fmt::format("{} is too large", input);
        if (value < minimum) return fmt::format("{} is too small: it must be {}", input, wanted);
        return {};
      },
      minimum == 0 ? "" : fmt::format(">={}", minimum));
}

namespace {

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string closest_name(const std::string& word, const std::vector<std::string>& names) {
  constexpr std::size_t kMaxEdits = 2;
  std::string best;
  std::size_t best_distance = kMaxEdits + 1;
  for (const std::string& name : names) {
    const std::size_t distance = name.starts_with(word) && word.size() >= 3 ? 1 : edit_distance(word, name);
    if (distance < best_distance) {
      best = name;
      best_distance = distance;
    }
  }
  return best;
}

std::string unknown_command_message(const std::string& word, const std::vector<std::string>& names,
                                    const std::string& help_hint) {
  const std::string closest = closest_name(word, names);
  return closest.empty() ? fmt::format("unknown command '{}' ({})", word, help_hint)
                         : fmt::format("unknown command '{}'; did you mean '{}'? ({})", word, closest, help_hint);
}

}  // namespace heapscope
