#include "runtime/glibc/glibc_layout.h"

namespace heapscope::glibc {

Layout layout_for(int minor) {
  Layout l;
  const int v = minor == 0 ? kNewestKnownMinor : minor;
  l.minor = minor;
  l.safe_linking = v >= 32;
  l.tcache_counts_u16 = v >= 30;
  l.heap_info_size = v >= 35 ? 48 : 32;
  if (v < 35) {
    l.par.sbrk_base = 72;
    l.par.hp_pagesize.reset();
    l.par.n_mmaps_from_sbrk = -32;
    l.par.n_mmaps_max_from_sbrk = -28;
    l.par.max_n_mmaps_from_sbrk = -24;
  }
  return l;
}

}  // namespace heapscope::glibc
