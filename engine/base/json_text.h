#pragma once
// JSON as text, for every writer of heapscope's JSON (commands' --json, snapshots, the index cache's notes).
// Names come from the target — symbols, DWARF, type objects in its memory — and need not be UTF-8;
// nlohmann::json throws on such a string when it writes it, which in a debugger would abort the debugger.
// Bytes that are not UTF-8 are written as U+FFFD instead.
#include <nlohmann/json.hpp>

#include <string>

namespace heapscope {

template <typename Json>
std::string json_text(const Json& value, int indent = -1) {
  return value.dump(indent, ' ', false, Json::error_handler_t::replace);
}

}  // namespace heapscope
