#include "session/object_headers_json.h"

#include <algorithm>
#include <cstring>

#include <nlohmann/json.hpp>

#include "base/json_text.h"

namespace heapscope {

std::string object_headers_meta_to_json(const ObjectHeaders& headers) {
  return json_text(nlohmann::json{
      {"layout", headers.layout}, {"release", headers.release}, {"count", headers.count},
      {"type_names", headers.type_names},
      {"scanned_prefix", headers.scanned_prefix}});
}

bool object_headers_from_saved(const std::string& text, std::span<const std::byte> starts,
                               std::span<const std::byte> types, std::span<const std::byte> ends, std::size_t blocks,
                               const std::shared_ptr<const void>& keep, ItemChecks checks, ObjectHeaders& headers) {
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    headers.layout = j.at("layout").get<std::string>();
    headers.count = j.at("count").get<std::uint64_t>();
    headers.release = j.at("release").get<std::uint32_t>();
    headers.type_names = j.at("type_names").get<std::vector<std::string>>();
    headers.scanned_prefix = j.at("scanned_prefix").get<std::vector<std::uint32_t>>();
  } catch (const nlohmann::json::exception&) {
    return false;
  }
  if (starts.size() != blocks || types.size() != blocks * sizeof(std::uint32_t) || headers.type_names.empty() ||
      headers.scanned_prefix.size() != headers.type_names.size() ||
      (!ends.empty() && ends.size() != blocks * sizeof(std::uint16_t)))
    return false;
  // An end past its block makes the scan read no further than the block: nothing to check per item.
  if (!ends.empty())
    headers.object_end_words =
        ViewedArray<std::uint16_t>::viewing({reinterpret_cast<const std::uint16_t*>(ends.data()), blocks}, keep);
  headers.starts = ViewedArray<std::uint8_t>::viewing({reinterpret_cast<const std::uint8_t*>(starts.data()), blocks}, keep);
  headers.type_of =
      ViewedArray<std::uint32_t>::viewing({reinterpret_cast<const std::uint32_t*>(types.data()), blocks}, keep);
  return checks == ItemChecks::sizes_only || all_below(headers.type_of.span(), headers.type_names.size());
}

}  // namespace heapscope
