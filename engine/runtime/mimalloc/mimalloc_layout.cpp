#include "runtime/mimalloc/mimalloc_layout.h"

namespace heapscope::mimalloc {

const Layout& layout_2_0_9() {
  static const Layout layout;
  return layout;
}

}  // namespace heapscope::mimalloc
