#include "session/object_headers_json.h"

#include <algorithm>
#include <cstring>

#include <nlohmann/json.hpp>

#include "base/json_text.h"

namespace heapscope {

std::string object_headers_meta_to_json(const ObjectHeaders& headers) {
  return json_text(nlohmann::json{
      {"layout", headers.layout}, {"release", headers.release}, {"count", headers.count},
      {"type_names", headers.type_names}, {"strided_types", headers.strided_types},
      {"weak_words", headers.weak_words},
      {"scanned_prefix", headers.scanned_prefix}});
}

bool object_headers_from_saved(const std::string& text, std::span<const std::byte> starts,
                               std::span<const std::byte> types, std::span<const std::byte> ends,
                               std::span<const std::byte> strided, std::size_t blocks,
                               const std::shared_ptr<const void>& keep, ItemChecks checks, ObjectHeaders& headers) {
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    headers.layout = j.at("layout").get<std::string>();
    headers.count = j.at("count").get<std::uint64_t>();
    headers.release = j.at("release").get<std::uint32_t>();
    headers.type_names = j.at("type_names").get<std::vector<std::string>>();
    headers.scanned_prefix = j.at("scanned_prefix").get<std::vector<std::uint32_t>>();
    headers.strided_types = j.at("strided_types").get<std::vector<std::uint8_t>>();
    headers.weak_words = j.at("weak_words").get<std::vector<std::uint64_t>>();
  } catch (const nlohmann::json::exception&) {
    return false;
  }
  if (starts.size() != blocks || types.size() != blocks * sizeof(std::uint32_t) || headers.type_names.empty() ||
      headers.scanned_prefix.size() != headers.type_names.size() ||
      (!ends.empty() && ends.size() != blocks * sizeof(std::uint16_t)) ||
      headers.strided_types.size() != headers.type_names.size() || headers.weak_words.size() != headers.type_names.size() ||
      strided.size() % sizeof(ObjectHeaders::StridedBlock) != 0)
    return false;
  // Few: copied, and each checked (in order, within the heap) whatever `checks` says.
  headers.strided.resize(strided.size() / sizeof(ObjectHeaders::StridedBlock));
  if (!strided.empty()) std::memcpy(headers.strided.data(), strided.data(), strided.size());
  for (std::size_t i = 0; i < headers.strided.size(); ++i)
    if (headers.strided[i].block >= blocks || (i > 0 && headers.strided[i].block <= headers.strided[i - 1].block))
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
