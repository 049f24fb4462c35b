#include "types/runtime_naming.h"

namespace heapscope {

void name_runtime_objects(BlockTypes& types, const ObjectHeaders& objects, const std::vector<bool>* within,
                          const std::vector<BlockId>* members) {
  if (objects.type_of.empty()) return;
  std::vector<std::uint32_t> ids(objects.type_names.size(), BlockTypes::kUnknown);  // runtime name → type id
  const auto name = [&](BlockId b) {
    if ((within && !(*within)[b]) || types.type_id(b) != BlockTypes::kUnknown) return;
    const std::uint32_t t = b < objects.type_of.size() ? objects.type_of[b] : 0;
    if (t == 0) return;
    if (ids[t] == BlockTypes::kUnknown) ids[t] = types.intern(objects.type_names[t], Naming::runtime);
    types.set(b, ids[t]);
  };
  if (members) {
    for (const BlockId b : *members) name(b);
  } else {
    for (BlockId b = 0; b < objects.type_of.size(); ++b) name(b);
  }
}

}  // namespace heapscope
