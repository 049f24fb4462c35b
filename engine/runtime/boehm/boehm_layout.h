// Boehm GC 8.2's structures on x86-64 as Debian 12 builds libgc1 (8.2.2: threads, parallel marking,
// thread-local allocation, munmap, gcj support, disclaim, atomic uncollectable objects). The offsets were
// learnt from 8.2.2's private headers (include/private/gc_priv.h, gc_hdrs.h, thread_local_alloc.h,
// finalize.c) compiled in that configuration; sizeof(GC_arrays) in that configuration is the size of the
// exported GC_arrays symbol, which is how the plug-in tells that a library is a build it knows.
#pragma once

#include <cstdint>

namespace heapscope::boehm {

// Heap blocks (HBLKSIZE), granules and the small-object limit.
inline constexpr std::uint64_t kBlockBytes = 4096;
inline constexpr unsigned kLogBlockBytes = 12;
inline constexpr std::uint64_t kGranuleBytes = 16;
inline constexpr std::uint64_t kMaxSmallObjectBytes = 2048;  // MAXOBJBYTES: larger objects get whole blocks
inline constexpr unsigned kFreeListCount = 129;              // MAXOBJGRANULES + 1 heads per kind

// struct _GC_arrays (the collector's state, one exported global).
struct ArraysLayout {
  static constexpr std::uint64_t size = 0x2c9f0;
  static constexpr std::uint64_t heap_size = 0x0;          // GC_get_heap_size()
  static constexpr std::uint64_t large_free_bytes = 0x18;  // free blocks, unmapped ones included
  static constexpr std::uint64_t bytes_allocd = 0x40;      // since the last collection
  static constexpr std::uint64_t all_bottom_indices = 0x68;
  static constexpr std::uint64_t hdr_free_list = 0x80;
  static constexpr std::uint64_t mark_stack = 0x90;
  static constexpr std::uint64_t mark_stack_limit = 0x98;
  static constexpr std::uint64_t composite_in_use = 0xa8;
  static constexpr std::uint64_t atomic_in_use = 0xb0;
  static constexpr std::uint64_t unmapped_bytes = 0xb8;  // GC_get_free_bytes() = large_free - unmapped
  static constexpr std::uint64_t all_nils = 0xc0;
  static constexpr std::uint64_t main_local_mark_stack = 0xd0;
  static constexpr std::uint64_t n_heap_sects = 0x100;
  static constexpr std::uint64_t gcj_free_lists = 0x108;  // a pointer to gcj's heads
  static constexpr std::uint64_t fo_entries = 0x110;
  static constexpr std::uint64_t ll_table_head = 0x118;   // long links: GC_push_finalizer_structures' roots
  static constexpr std::uint64_t dl_table_head = 0x130;
  static constexpr std::uint64_t fo_head = 0x148;         // fnlz_roots: the finalizable-object hash table
  static constexpr std::uint64_t finalize_now = 0x150;    // objects whose finalizers are ready to run
  static constexpr std::uint64_t log_fo_table_size = 0x158;
  static constexpr std::uint64_t toggleref_arr = 0x160;
  static constexpr std::uint64_t ext_descriptors = 0x1a8;  // typed allocation's descriptors (a root)
  static constexpr std::uint64_t n_root_sets = 0x17c;     // int
  static constexpr std::uint64_t excl_table_entries = 0x180;
  static constexpr std::uint64_t valid_offsets = 0x59e8;  // char[4096]: the displacements that count
  static constexpr std::uint64_t normal_free_lists = 0x5b8;       // NORMAL (GC_malloc)
  static constexpr std::uint64_t atomic_free_lists = 0x9c0;       // PTRFREE (GC_malloc_atomic)
  static constexpr std::uint64_t uncollectable_free_lists = 0xdc8;
  static constexpr std::uint64_t atomic_uncollectable_free_lists = 0x11d0;
  static constexpr std::uint64_t heap_sects = 0x169e8;     // a pointer to {start, bytes} × n_heap_sects
  static constexpr std::uint64_t static_roots = 0x169f0;   // struct roots[2048]
  static constexpr std::uint64_t static_root_bytes = 0x20; // {start, end, next, tmp}
  static constexpr std::uint64_t static_root_tmp = 0x18;   // int: registered for a dynamic library's data
  static constexpr std::uint64_t max_root_sets = 2048;
  static constexpr std::uint64_t excl_table = 0x269f0;     // {start, end} × excl_table_entries
  static constexpr std::uint64_t excl_bytes = 0x10;
  static constexpr std::uint64_t max_exclusions = 512;
  static constexpr std::uint64_t valid_offset_count = 4096;
  static constexpr std::uint64_t top_index = 0x289f0;
};

// The words of GC_arrays that hold the collector's own roots (what GC_push_finalizer_structures and
// GC_push_typed_structures push): every other word of it is bookkeeping that points into the heap
// without keeping anything alive there (free lists, the scan pointer, the last heap address).
inline constexpr std::uint64_t kArraysRootWords[][2] = {
    {ArraysLayout::ll_table_head, 8}, {ArraysLayout::dl_table_head, 8}, {ArraysLayout::fo_head, 16},
    {ArraysLayout::toggleref_arr, 8}, {ArraysLayout::ext_descriptors, 8}};

// struct hblkhdr: one per heap block (or run of blocks), kept outside the heap.
struct HeaderLayout {
  static constexpr std::uint64_t size = 0x148;
  static constexpr std::uint64_t next = 0x0;  // free blocks: the free list; in use: the reclaim list
  static constexpr std::uint64_t block = 0x10;
  static constexpr std::uint64_t kind = 0x18;   // unsigned char: the object kind
  static constexpr std::uint64_t flags = 0x19;  // unsigned char
  static constexpr std::uint64_t object_bytes = 0x20;  // in use: the objects' size; free: the run's bytes
  static constexpr std::uint64_t marks = 0x40;
  static constexpr std::uint8_t was_unmapped = 2;  // a free run given back to the system
  static constexpr std::uint8_t free_block = 4;
};

// bottom_index: the second level of the block → header map (a hash of first levels on 64-bit).
struct BottomIndexLayout {
  static constexpr std::uint64_t size = 0x2020;
  static constexpr unsigned log_entries = 10;
  static constexpr std::uint64_t entries = 1024;
  static constexpr std::uint64_t asc_link = 0x2000;
  static constexpr std::uint64_t key = 0x2010;
  // An entry up to this value is no header: the block is that many blocks into a large object (0: none).
  static constexpr std::uint64_t max_jump = kBlockBytes - 1;
};

// struct obj_kind (GC_obj_kinds[], hidden): each kind's free list heads and reclaim lists.
struct ObjKindLayout {
  static constexpr std::uint64_t size = 0x30;
  static constexpr std::uint64_t free_lists = 0x0;
  static constexpr std::uint64_t reclaim_lists = 0x8;
  static constexpr std::uint64_t descriptor = 0x10;       // GC_DS_LENGTH (tag 0): the bytes scanned
  static constexpr std::uint64_t relocate_descriptor = 0x18;  // int: the object's size is added to it
  static constexpr unsigned max_kinds = 16;
};
// A descriptor's low two bits say how the collector scans an object: 2 (GC_DS_PROC) through a procedure.
inline constexpr std::uint64_t kDescriptorTagMask = 3, kProcedureTag = 2;
inline constexpr const char* kKindNames[] = {"atomic", "normal", "uncollectable", "atomic uncollectable"};
// The built-in kinds the collector never scans (PTRFREE, AUNCOLLECTABLE): their objects hold no pointers.
constexpr bool kind_is_pointer_free(unsigned kind) { return kind == 0 || kind == 3; }
// The kinds the collector never frees (UNCOLLECTABLE, AUNCOLLECTABLE: IS_UNCOLLECTABLE).
constexpr bool kind_is_uncollectable(unsigned kind) { return kind == 2 || kind == 3; }

// The thread-local free lists (struct thread_local_freelists), reached through the one word of libgc's
// static TLS (GC_thread_key): 3 kinds × 25 heads, then gcj's 25. A head below a block's size is a count,
// not a list.
struct ThreadFreeListsLayout {
  static constexpr unsigned heads = 4 * 25;
  static constexpr unsigned per_kind = 25;
};

// struct finalizable_object (finalize.c): in the collector's heap, chained from the hash table fo_head.
struct FinalizableLayout {
  static constexpr std::uint64_t hidden_object = 0x0;  // ~object while registered; the object once ready
  static constexpr std::uint64_t next = 0x8;
  static constexpr std::uint64_t function = 0x10;
  static constexpr std::uint64_t client_data = 0x18;
  static constexpr std::uint64_t object_bytes = 0x20;
  static constexpr std::uint64_t mark_proc = 0x28;
  static constexpr std::uint64_t size = 0x30;
};

}  // namespace heapscope::boehm
