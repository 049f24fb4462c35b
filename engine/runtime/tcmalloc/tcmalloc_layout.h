// gperftools' tcmalloc structures as heapscope reads them: offsets for the 2.10 release on x86-64 in its
// default configuration (8 KiB pages, at most 128 size classes, transfer caches, the two-level page map
// of 48-bit address spaces), learnt from the release's headers and checked against Debian 12's build.
// Nothing here is trusted unchecked: tcmalloc_runtime validates every structure it finds with them.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace heapscope::tcmalloc {

inline constexpr std::uint64_t kPageShift = 13;  // 8 KiB pages
inline constexpr std::uint64_t kPageBytes = std::uint64_t{1} << kPageShift;
inline constexpr std::uint32_t kMaxClasses = 128;  // kClassSizesMax
inline constexpr std::uint64_t kMaxSmallSize = 256 * 1024;  // kMaxSize: larger requests get spans of their own
inline constexpr std::uint64_t kMaxSmallSpanPages = 128;    // kMaxPages: exact-size free lists

// SizeMap (Static::sizemap_): size class → object size and span length.
struct SizeMapLayout {
  std::uint64_t num_objects_to_move = 2172;  // int32[128]
  std::uint64_t class_to_size = 2684;        // int32[128]
  std::uint64_t class_to_pages = 3200;       // size_t[128]
  std::uint64_t num_size_classes = 4224;     // size_t
  std::uint64_t size = 4232;
};

// Span: a run of pages, either one large allocation, a page heap free run, or the objects of one class.
struct SpanLayout {
  std::uint64_t start = 0;    // page number
  std::uint64_t length = 8;   // pages
  std::uint64_t next = 16;
  std::uint64_t prev = 24;
  std::uint64_t objects = 32;  // free objects of a small-object span, linked through their first word
  std::uint64_t bits = 40;     // refcount:16, sizeclass:8, location:2, sample:1
  std::uint64_t size = 48;
  static constexpr unsigned kSizeClassShift = 16;
  static constexpr unsigned kLocationShift = 24;
  static constexpr unsigned kInUse = 0, kOnNormalFreeList = 1, kOnReturnedFreeList = 2;
};

// CentralFreeListPadded (Static::central_cache_[128]): per class, spans with free objects and the
// transfer cache (chains of objects moving between thread caches and the central list).
struct CentralFreeListLayout {
  std::uint64_t size_class = 8;    // size_t
  std::uint64_t empty = 16;        // Span list head
  std::uint64_t nonempty = 64;     // Span list head
  std::uint64_t num_spans = 112;
  std::uint64_t tc_slots = 128;    // {head, tail}[64]
  std::uint64_t used_slots = 1152;  // int32
  std::uint64_t max_cache_size = 1160;  // int32
  std::uint64_t stride = 1216;     // padded to 64 bytes
  static constexpr std::uint32_t kMaxTransferEntries = 64;
};

// PageHeap (Static::pageheap_): the page map's radix tree and the free span lists.
struct PageHeapLayout {
  std::uint64_t pagemap_root = 524288;      // after the 64 Ki-entry PackedCache; Leaf*[1 << 17]
  std::uint64_t pagemap_allocator = 1572864;  // void* (*)(size_t): a function of the library
  std::uint64_t free_lists = 1572968;       // SpanList {Span normal, returned}[128]
  std::uint64_t free_list_stride = 96;
  std::uint64_t stats = 1585256;            // system_bytes, free_bytes, unmapped_bytes, committed_bytes
  static constexpr unsigned kRootBits = 17;  // TCMalloc_PageMap2<35>
  static constexpr unsigned kLeafBits = 18;
};

// ThreadCache (thread_heaps_ list, one per thread).
struct ThreadCacheLayout {
  std::uint64_t free_list_stride = 32;  // FreeList {void* list_; uint32 length_, lowater_, max_length_,
                                        // length_overages_; int32 size_} [128]
  std::uint64_t list_length = 8;
  std::uint64_t list_object_size = 24;
  std::uint64_t size = 4096;  // int32: bytes cached
  std::uint64_t tid = 4128;
  std::uint64_t next = 4144;
  std::uint64_t prev = 4152;
  std::uint64_t object_bytes = 4160;  // sizeof(ThreadCache), cache-line aligned
};

struct Layout {
  SizeMapLayout sizemap;
  SpanLayout span;
  CentralFreeListLayout central;
  PageHeapLayout pageheap;
  ThreadCacheLayout thread_cache;
};

// Where the hidden members of tcmalloc::Static lie relative to the exported Static::pageheap_lock_ in one
// known build (the linker's placement, not the source's, decides it).
struct KnownBuild {
  std::string_view build_id;
  std::string_view description;
  std::int64_t sizemap;        // Static::sizemap_
  std::int64_t central_cache;  // Static::central_cache_
  std::int64_t pageheap;       // Static::pageheap_
};

// The 2.10 layout (the one release heapscope knows).
const Layout& layout_2_10();
inline constexpr std::string_view kKnownRelease = "2.10";
std::optional<KnownBuild> known_build(std::string_view build_id);
// The placement of the known build, tried first on an unknown build of a known release.
const KnownBuild& default_placement();

}  // namespace heapscope::tcmalloc
