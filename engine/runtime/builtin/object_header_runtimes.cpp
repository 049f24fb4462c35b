#include "runtime/object_headers.h"

// The runtimes whose object headers heapscope knows (runtime/object_headers.h), tried in turn.

#include "runtime/cpython/cpython_objects.h"

namespace heapscope {

std::optional<ObjectHeaders> find_object_headers(const Image& image, const SymbolIndex& symbols, const HeapModel& heap) {
  return find_cpython_objects(image, symbols, heap);
}

bool check_object_headers(const Image& image, const SymbolIndex& symbols, const HeapModel& heap,
                          const ObjectHeaders& saved, std::span<const std::size_t> blocks, std::string* why) {
  return check_cpython_objects(image, symbols, heap, saved, blocks, why);
}

std::string runtime_field_at(const Image& image, const HeapModel& heap, const ObjectHeaders& headers,
                             std::size_t block, std::uint64_t offset) {
  return cpython_field_at(image, heap, headers, block, offset);
}

}  // namespace heapscope
