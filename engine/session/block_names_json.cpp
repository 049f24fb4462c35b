#include "session/block_names_json.h"

#include <nlohmann/json.hpp>

#include "base/json_text.h"

namespace heapscope {

namespace {

// A type as one array (a heap has thousands of types: field names would double the text):
// [name, source, naming, from vtable, first of, DWARF module, DWARF DIE].
nlohmann::json type_row(const BlockTypes::SavedType& t, const DwarfTypes::SavedRef& ref) {
  return nlohmann::json::array({t.name, t.source, static_cast<int>(t.naming), t.from_vtable, t.first_of, ref.module, ref.die});
}

}  // namespace

std::string names_meta_to_json(const BlockTypes& types, const DwarfTypes& dwarf) {
  const std::vector<BlockTypes::SavedType> saved = types.saved_types();
  std::vector<DwarfTypes::SavedRef> refs = dwarf.saved_refs();
  refs.resize(saved.size());
  nlohmann::json rows = nlohmann::json::array();
  for (std::size_t id = 0; id < saved.size(); ++id) rows.push_back(type_row(saved[id], refs[id]));
  return json_text(nlohmann::json{{"wide_ids", types.ids().wide()}, {"types", std::move(rows)}});
}

bool names_from_saved(const std::string& text, std::span<const std::byte> ids, const std::shared_ptr<const void>& keep,
                      std::size_t blocks, ItemChecks checks, BlockTypes& types, DwarfTypes& dwarf, std::string* why) {
  std::vector<BlockTypes::SavedType> saved;
  std::vector<DwarfTypes::SavedRef> refs;
  bool wide = false;
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    wide = j.at("wide_ids").get<bool>();
    for (const nlohmann::json& row : j.at("types")) {
      const int naming = row.at(2).get<int>();
      if (naming < 0 || naming > static_cast<int>(Naming::content)) throw std::out_of_range("naming");
      saved.push_back({row.at(0).get<std::string>(), row.at(1).get<std::string>(), static_cast<Naming>(naming),
                       row.at(3).get<bool>(), row.at(4).get<std::uint32_t>()});
      refs.push_back({row.at(5).get<std::uint16_t>(), row.at(6).get<std::uint64_t>()});
    }
  } catch (const std::exception&) {
    *why = "damaged names";
    return false;
  }
  TypeIdArray block_ids = TypeIdArray::viewing(wide, ids, keep);
  if (block_ids.size() != blocks || saved.empty()) {
    *why = "names of another heap";
    return false;
  }
  for (const BlockTypes::SavedType& t : saved)
    if (t.first_of != BlockTypes::kUnknown && t.first_of >= saved.size()) {
      *why = "damaged names";
      return false;
    }
  if (checks == ItemChecks::every_item && !block_ids.all_below(static_cast<std::uint32_t>(saved.size()))) {
    *why = "a block's type is not in the names";
    return false;
  }
  dwarf.restore(std::move(refs));
  types = BlockTypes::restored(std::move(saved), std::move(block_ids));
  return true;
}

}  // namespace heapscope
