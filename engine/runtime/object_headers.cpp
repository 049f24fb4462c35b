#include "runtime/object_headers.h"

#include "runtime/cpython/cpython_objects.h"

namespace heapscope {

std::optional<ObjectHeaders> find_object_headers(const Image& image, const HeapModel& heap) {
  return find_cpython_objects(image, heap);
}

}  // namespace heapscope
