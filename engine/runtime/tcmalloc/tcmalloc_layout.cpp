#include "runtime/tcmalloc/tcmalloc_layout.h"

#include <array>

#include "runtime/known_builds.h"

namespace heapscope::tcmalloc {

namespace {

// Debian 12's libtcmalloc-minimal4 2.10-1 (amd64): sizemap_ ends where pageheap_lock_ starts;
// central_cache_ and pageheap_ lie below it in .bss.
constexpr std::array kKnownBuilds{
    KnownBuild{"39dfd4a5855703fa6c2469749282f75b18a1aa66", "Debian 12 libtcmalloc-minimal4 2.10-1 amd64", -4232,
               -159880, -1745384},
};

}  // namespace

const Layout& layout_2_10() {
  static const Layout layout;
  return layout;
}

std::optional<KnownBuild> known_build(std::string_view build_id) {
  return find_known_build(std::span<const KnownBuild>(kKnownBuilds), build_id);
}

const KnownBuild& default_placement() { return kKnownBuilds.front(); }

}  // namespace heapscope::tcmalloc
