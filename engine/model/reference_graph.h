// ReferenceGraph: who points to whom. A conservative scan reads every aligned word of every allocated
// block and root range; a word that lands in an allocated block's user bytes is an edge. Edges are kept
// in CSR form with 32-bit block ids; the top bit of an edge marks a pointer into the block's interior.
// Forward edges are built by the scan (in parallel, one contiguous slice of blocks per worker, so the
// per-worker arrays are already in CSR order and are kept as they are, not copied); reverse edges are
// built on first use. Both keep their offsets in CompactOffsets (about a byte a block each). A graph can
// also be made from the arrays of an earlier scan of the same image (the index cache,
// session/index_cache.h), its edges viewed in place.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "base/progress.h"
#include "image/word_scan.h"
#include "model/block_index.h"
#include "model/roots.h"
#include "model/compact_offsets.h"
#include "model/u32_array.h"
#include "runtime/object_headers.h"

namespace heapscope {

inline constexpr std::uint32_t kInteriorBit = 0x80000000u;
inline BlockId edge_target(std::uint32_t e) { return e & ~kInteriorBit; }
inline bool edge_is_interior(std::uint32_t e) { return (e & kInteriorBit) != 0; }

class ReferenceGraph {
 public:
  // Scans the blocks `index` covers and the roots, with up to `workers` threads (0: all cores). The index
  // is the session's one and must outlive the graph. With a runtime's object `headers`, a pointer to the
  // object past a block's header is a pointer to the block's start, and the header's links are not scanned.
  ReferenceGraph(const Image& image, const BlockIndex& index, const RootSet& roots, unsigned workers = 0,
                 const ObjectHeaders* headers = nullptr);
  // Edges in CSR form: item i of [first, last) (a block, or a root range) has the edges
  // edges[offsets[i - first], offsets[i - first + 1]); offsets start at 0.
  struct EdgeSlice {
    std::uint32_t first = 0, last = 0;
    std::span<const std::uint32_t> offsets;  // last - first + 1 entries
    std::span<const std::uint32_t> edges;
  };
  // The roots pointing into blocks, as (block, root range) pairs sorted by block: root edges are few beside
  // blocks, so not an offset per block.
  struct RootReferrers {
    std::span<const std::uint32_t> blocks;  // sorted
    std::span<const std::uint32_t> roots;   // as many
  };
  // Every block's edges, their offsets compact as the graph keeps them.
  struct BlockEdges {
    CompactOffsets::Arrays offsets;  // items: every block
    std::span<const std::uint32_t> edges;
  };
  // The arrays of an earlier scan of the same image, blocks and roots (what the scan builds, and the
  // reverse edges when they were built), in memory that `keep` holds alive for the graph's lifetime.
  struct SavedArrays {
    BlockEdges forward;
    EdgeSlice roots;               // every root range
    BlockEdges reverse;            // no items: not saved, built on first use
    RootReferrers root_referrers;  // likewise
    std::shared_ptr<const void> keep;
    ItemChecks checks = ItemChecks::every_item;  // of the blocks' edges and offsets; the roots' are few
  };
  // Takes them as they are (no word is scanned); throws std::invalid_argument when their sizes do not fit
  // `index` and `roots` or an edge leads outside them (one pass over every array: a damaged file must not
  // make a later read go astray; with ItemChecks::sizes_only, the blocks' arrays' sizes alone). Whether the
  // edges are this image's is the caller's check (rescan()).
  ReferenceGraph(const Image& image, const BlockIndex& index, const RootSet& roots, SavedArrays arrays,
                 const ObjectHeaders* headers = nullptr);
  const ObjectHeaders* object_headers() const { return headers_; }

  // What SavedArrays would hold: the forward edges as the scan's workers left them (one part each, in
  // block order; forward_offsets() joins their offsets), the roots' edges, and the reverse edges (built
  // here when not yet).
  struct ForwardPart {
    BlockId first = 0, last = 0;
    const CompactOffsets* offsets = nullptr;  // last - first items
    std::span<const std::uint32_t> edges;
  };
  std::vector<ForwardPart> forward_parts() const;
  // The forward offsets of every block in one CompactOffsets, over the parts' edges one after the other.
  CompactOffsets forward_offsets() const;
  EdgeSlice root_slice() const;
  const CompactOffsets& reverse_offsets() const;
  std::span<const std::uint32_t> reverse_edges() const;
  RootReferrers root_referrers() const;

  // The edges the scan finds in block `b` / root range `root` of the image now: what out_edges and
  // root_edges hold for a graph that was scanned, and how a saved one is checked.
  std::vector<std::uint32_t> rescan(BlockId b) const;
  std::vector<std::uint32_t> rescan_root(std::size_t root) const;

  const Image& image() const { return image_; }
  const RootSet& roots() const { return roots_; }
  // Whether `word`, pointing into `target`, makes an interior edge (not its start, nor its object's start
  // past a runtime's header).
  bool points_inside(BlockId target, std::uint64_t word) const { return edge_is_interior(edge_to(target, word)); }

  std::size_t block_count() const { return block_count_; }
  std::size_t edge_count() const { return edge_count_; }
  const BlockIndex& index() const { return index_; }

  std::span<const std::uint32_t> out_edges(BlockId b) const {  // inline: the floods ask it for every block
    for (const Part& p : parts_)
      if (b < p.last) {
        if (b < p.first) break;
        const auto [first, last] = p.offsets.range(b - p.first);
        return {p.edges.data() + first, last - first};
      }
    return {};
  }
  // fn(b, out_edges(b)) for every block in order, without a lookup each (the passes over all blocks).
  template <typename Fn>
  void for_each_block_edges(Fn&& fn) const {
    for (const Part& p : parts_)
      p.offsets.for_each_range([&](std::size_t i, std::uint32_t first, std::uint32_t last) {
        fn(static_cast<BlockId>(p.first + i), std::span<const std::uint32_t>(p.edges.data() + first, last - first));
      });
  }
  // Roots' edges: for root range r, the blocks its words point to.
  std::span<const std::uint32_t> root_edges(std::size_t root) const;
  std::size_t root_count() const { return root_offsets_.size() - 1; }
  std::size_t root_edge_count() const { return root_targets_.size(); }

  // Where an edge lies among all blocks' edges ([0, edge_count()), in block order) / all roots' edges
  // ([0, root_edge_count())), given a reference into a span out_edges / root_edges returned: what a
  // bit per edge is indexed by (the idioms' explained pointers, model/idiom_census.h).
  std::size_t edge_position(const std::uint32_t& e) const {
    std::size_t before = 0;
    for (const Part& p : parts_) {
      if (&e >= p.edges.data() && &e < p.edges.data() + p.edges.size()) return before + (&e - p.edges.data());
      before += p.edges.size();
    }
    return before;  // not an edge of this graph: past the end
  }
  std::size_t root_edge_position(const std::uint32_t& e) const { return &e - root_targets_.data(); }

  // Reverse edges (built on first call): blocks pointing into b, and roots pointing into b.
  std::span<const std::uint32_t> in_edges(BlockId b) const {  // inline: the dominator tree asks it for every block
    if (!reverse_built_.load(std::memory_order_acquire)) build_reverse();
    const auto [first, last] = in_offsets_.range(b);
    return {in_edges_.data() + first, last - first};
  }
  std::span<const std::uint32_t> in_root_edges(BlockId b) const;  // root indices

  std::size_t memory_bytes() const;

  // Edge sites: where the pointers behind edges live. The graph keeps 4 bytes per edge, not where each
  // came from, so these rescan the one block or root range asked about (a few words), in one place.
  // Every word of block `from` that points into block `to`, in address order.
  std::vector<Address> edge_sites(BlockId from, BlockId to) const;
  // Every word of root range `root` that points into block `to`; for a thread's registers, the
  // RegisterWord::slot of each register word that does.
  std::vector<Address> root_edge_sites(std::size_t root, BlockId to) const;
  // Calls fn(word address, word, block) for every word of [start, end) that points into an allocated
  // block: the scan that builds the graph, and how a root range's pointers are split among the variables
  // or frames it holds.
  template <typename Fn>
  void for_each_pointer(Address start, Address end, Fn&& fn) const {
    MemoryCursor memory(image_);
    for_each_pointer(memory, start, end, fn);
  }
  // The same through `memory`, a cursor kept across the ranges of one scan (neighbouring blocks).
  template <typename Fn>
  void for_each_pointer(MemoryCursor& memory, Address start, Address end, Fn&& fn) const;
  // The words of block `b` the scan reads (an allocated block's user bytes but a runtime header's links)
  // that point into allocated blocks: fn(word address, word, block).
  template <typename Fn>
  void for_each_block_pointer(MemoryCursor& memory, BlockId b, Fn&& fn) const;
  // The parts of block b the scan reads, as fn(start, end): all its usable bytes but a runtime's header
  // links (and past the header of an object whose body holds no pointers), none of a pointer-free block's.
  template <typename Fn>
  void for_each_scanned_range(BlockId b, Fn&& fn) const;
  // Those of root range `root`; for a thread's registers, the word's RegisterWord::slot as its address.
  template <typename Fn>
  void for_each_root_pointer(std::size_t root, Fn&& fn) const { for_each_root_pointer(roots_.ranges[root], fn); }

 private:
  struct Part {  // the edges of blocks [first, last), scanned by one worker (or saved)
    BlockId first = 0, last = 0;
    CompactOffsets offsets;  // last - first items
    U32Array edges;
  };
  void build_reverse() const;
  // Splits the blocks into `n` parts of about equal bytes; returns about how many bytes they hold.
  std::uint64_t split_by_bytes(const BlockArray& blocks, unsigned n);
  // The scans of one block (through `memory`, kept across a slice's blocks) and of one root range: append
  // their edges to `out`; the graph's build and rescan() alike.
  template <class Out>  // a std::vector or a U32Buffer
  void scan_block(MemoryCursor& memory, BlockId b, Out& out) const;
  void scan_root(std::size_t root, std::vector<std::uint32_t>& out) const;
  // for_each_pointer over a root range; a thread's registers give the Reg (as an Address) for the word's place.
  template <typename Fn>
  void for_each_root_pointer(const RootRange& root, Fn&& fn) const;
  // The edge to `target` that `word` makes: the block, marked interior when the word points past its start.
  std::uint32_t edge_to(BlockId target, std::uint64_t word) const {
    const Address start = index_.blocks()[target].address();
    const bool to_object = headers_ && word != start && word == start + headers_->object_offset(target);
    return target | (word != start && !to_object ? kInteriorBit : 0u);
  }

  const Image& image_;
  const RootSet& roots_;
  const BlockIndex& index_;
  const ObjectHeaders* headers_ = nullptr;
  std::size_t block_count_ = 0;
  std::size_t edge_count_ = 0;
  std::vector<Part> parts_;
  U32Array root_offsets_;
  U32Array root_targets_;
  std::shared_ptr<const void> saved_;  // the memory a graph made from SavedArrays views

  bool reverse_saved_ = false;  // the reverse edges came with SavedArrays
  mutable std::once_flag reverse_once_;
  // Set once the reverse edges are there: a load, where std::call_once is a call into libc per lookup.
  mutable std::atomic<bool> reverse_built_{false};
  mutable CompactOffsets in_offsets_;
  mutable U32Array in_edges_;
  mutable U32Array in_root_blocks_;  // sorted; in_roots_[i] is a root range pointing into in_root_blocks_[i]
  mutable U32Array in_roots_;
};

// The one traversal the analyses share: from the blocks on `pending` (marked by the caller), marks and
// follows, depth first, every edge of `next(block)` (a span of edges: out_edges, in_edges) that `admit(edge)`
// accepts and that leads to a block not marked yet. Each block it visits is a step of the current
// progress (so Ctrl-C stops it: progress_step throws Interrupted).
template <class Marks, class Next, class Admit>
void flood(std::vector<BlockId>& pending, Marks& marked, Next&& next, Admit&& admit) {
  constexpr std::uint32_t kProgressBlocks = 1 << 16;
  std::uint32_t visited = 0;
  while (!pending.empty()) {
    const BlockId b = pending.back();
    pending.pop_back();
    for (std::uint32_t e : next(b)) {
      const BlockId to = edge_target(e);
      if (marked[to] || !admit(e)) continue;
      marked[to] = true;
      pending.push_back(to);
    }
    if (++visited == kProgressBlocks) {
      progress_step(visited);
      visited = 0;
    }
  }
  progress_step(visited);
}

template <typename Fn>
void ReferenceGraph::for_each_pointer(MemoryCursor& memory, Address start, Address end, Fn&& fn) const {
  for_each_word(memory, start, end, [&](Address at, std::uint64_t word) {
    if (const BlockId b = index_.find(word); b != kNoBlock) fn(at, word, b);
  });
}

template <typename Fn>
void ReferenceGraph::for_each_block_pointer(MemoryCursor& memory, BlockId b, Fn&& fn) const {
  for_each_scanned_range(b, [&](Address start, Address end) { for_each_pointer(memory, start, end, fn); });
}

template <typename Fn>
void ReferenceGraph::for_each_scanned_range(BlockId b, Fn&& fn) const {
  const Block& blk = index_.blocks()[b];
  if (!is_allocated(blk.state) || blk.pointer_free) return;
  // A runtime's header links (its GC list) are bookkeeping: the scan passes over them.
  const auto [links_first, links_last] = headers_ ? headers_->links(b) : std::pair<std::uint32_t, std::uint32_t>{0, 0};
  const Address start = blk.address();
  // A runtime's object whose body holds no pointers: its header alone.
  const std::uint32_t prefix = headers_ ? headers_->scanned_bytes(b) : 0;
  const std::uint64_t end = prefix ? std::min<std::uint64_t>(prefix, blk.usable_size()) : blk.usable_size();
  // Records one word of which is no reference (a dict's hashes): their other words alone.
  if (const ObjectHeaders::StridedBlock* s = headers_ ? headers_->strided_block(b) : nullptr; s && s->stride_words) {
    const std::uint64_t stride = std::uint64_t{s->stride_words} * 8, skipped = std::uint64_t{s->skipped_word} * 8;
    for (std::uint64_t at = std::uint64_t{s->first_word} * 8; at + stride <= end; at += stride) {
      if (skipped > 0) fn(start + at, start + at + skipped);
      fn(start + at + skipped + 8, start + at + stride);
    }
    return;
  }
  // A weak reference's words are no references: the ranges around them.
  const std::uint64_t weak = headers_ ? headers_->weak_words_of(b) : 0;
  const Address object = start + (headers_ ? headers_->object_offset(b) : 0);
  auto emit = [&](Address from, Address to) {
    if (weak == 0) return fn(from, to);
    Address run = from;
    for (Address at = from; at + 8 <= to && at < object + 64 * 8; at += 8)
      if (at >= object && (weak >> ((at - object) / 8) & 1)) {
        if (run < at) fn(run, at);
        run = at + 8;
      }
    if (run < to) fn(run, to);
  };
  if (links_first > 0) emit(start, start + links_first);
  // An object past a prefix of the runtime's own bytes (a split dict's values past their order bytes)
  // without list links: the prefix is no pointer (a reused slot's stale link may lie there).
  const std::uint64_t from = links_last > 0 ? links_last : headers_ ? headers_->object_offset(b) : 0;
  emit(start + from, start + end);
}

template <typename Fn>
void ReferenceGraph::for_each_root_pointer(const RootRange& root, Fn&& fn) const {
  if (root.hidden_pointer) {  // a collector's disguised addresses: each word complemented
    for (Address at = root.start; at + 8 <= root.end; at += 8)
      if (const WordRead w = image_.read_u64(at))
        if (const BlockId b = index_.find(~*w); b != kNoBlock) fn(at, ~*w, b);
    return;
  }
  if (root.kind != RootKind::registers) return for_each_pointer(root.start, root.end, fn);
  const ThreadState& t = image_.threads()[root.thread];
  for (const RegisterWord& w : register_words(t))
    if (const BlockId b = index_.find(w.value); b != kNoBlock) fn(w.slot, w.value, b);
}

}  // namespace heapscope
