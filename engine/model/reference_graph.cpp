#include "model/reference_graph.h"

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <tuple>
#include <unordered_map>

#include "base/bounded_scan.h"
#include "base/progress.h"
#include "base/workers.h"

namespace heapscope {

template <class Out>
void ReferenceGraph::scan_block(MemoryCursor& memory, BlockId b, Out& out) const {
  for_each_block_pointer(memory, b, [&](Address, std::uint64_t word, BlockId target) { out.push_back(edge_to(target, word)); });
}

void ReferenceGraph::scan_root(std::size_t root, std::vector<std::uint32_t>& out) const {
  for_each_root_pointer(roots_.ranges[root],
                        [&](Address, std::uint64_t word, BlockId target) { out.push_back(edge_to(target, word)); });
}

// Slices of equal byte volume keep the workers equally busy when block sizes vary. The volumes are judged
// from every kSampleStride-th block: two passes over an array of millions of blocks would cost more than
// the balance they buy. Returns the blocks' total bytes, as the sample estimates it (for progress).
std::uint64_t ReferenceGraph::split_by_bytes(const BlockArray& blocks, unsigned n) {
  constexpr std::size_t kSampleStride = 64;
  std::vector<std::uint64_t> upto;  // upto[k]: the sampled bytes of the blocks before block k * kSampleStride
  std::uint64_t sampled = 0;
  for (std::size_t i = 0; i < blocks.size(); i += kSampleStride) {
    upto.push_back(sampled);
    sampled += blocks[i].chunk_size();
  }
  parts_.resize(n);
  std::size_t k = 0;
  for (unsigned p = 0; p < n; ++p) {
    parts_[p].first = p == 0 ? 0 : parts_[p - 1].last;
    const std::uint64_t goal = sampled / n * (p + 1);
    while (k < upto.size() && upto[k] < goal) ++k;
    parts_[p].last = p + 1 == n ? static_cast<BlockId>(blocks.size())
                                : std::max(parts_[p].first, static_cast<BlockId>(std::min(k * kSampleStride, blocks.size())));
  }
  return sampled * kSampleStride;
}

ReferenceGraph::ReferenceGraph(const Image& image, const BlockIndex& index, const RootSet& roots, unsigned workers,
                               const ObjectHeaders* headers)
    : image_(image), roots_(roots), index_(index), headers_(headers), block_count_(index.blocks().size()) {
  const auto& blocks = index.blocks();
  if (blocks.size() >= kInteriorBit) throw std::length_error("more than 2^31 heap blocks");

  const unsigned n = worker_count(blocks.size(), 4096, workers);
  const std::uint64_t total_bytes = split_by_bytes(blocks, n);
  // Progress counts the blocks' bytes; an interrupt (or any failure) in one slice is rethrown once every
  // slice has stopped.
  progress_total(total_bytes);
  auto scan_part = [&](Part& part) {
    CompactOffsets::Builder offsets(part.last - part.first);
    U32Buffer edges;
    edges.reserve(part.last - part.first);  // about an edge a block in most heaps; more costs a remap, not a copy
    MemoryCursor memory(image_);  // one region lookup per region the slice's blocks lie in, not per block
    std::uint64_t bytes_since = 0;
    for (BlockId b = part.first; b < part.last; ++b) {
      bytes_since += blocks[b].chunk_size();
      if (bytes_since >= (std::uint64_t{1} << 20)) {
        progress_step(bytes_since);
        bytes_since = 0;
      }
      const std::size_t before = edges.size();
      scan_block(memory, b, edges);
      if (edges.size() >= 0xffffffffu) throw std::length_error("more than 2^32 edges in one slice");
      offsets.add(static_cast<std::uint32_t>(edges.size() - before));
    }
    edges.shrink_to_fit();
    part.offsets = offsets.finish();
    part.edges = U32Array(std::move(edges));
  };
  run_workers(n, [&](unsigned p) { scan_part(parts_[p]); });
  for (const Part& p : parts_) edge_count_ += p.edges.size();

  std::vector<std::uint32_t> root_offsets{0}, root_targets;
  for (std::size_t r = 0; r < roots.ranges.size(); ++r) {
    scan_root(r, root_targets);
    root_offsets.push_back(static_cast<std::uint32_t>(root_targets.size()));
  }
  root_offsets_ = U32Array(std::move(root_offsets));
  root_targets_ = U32Array(std::move(root_targets));
}

namespace {

// Whether `slice` is CSR over `items` items: offsets one more, from 0 to the edge count, never decreasing.
bool fits(const ReferenceGraph::EdgeSlice& slice, std::size_t items) {
  return slice.first == 0 && slice.last == items && slice.offsets.size() == items + 1 && slice.offsets.front() == 0 &&
         slice.offsets.back() == slice.edges.size() && std::is_sorted(slice.offsets.begin(), slice.offsets.end());
}

// The compact offsets of `saved` when they cover `blocks` blocks and all its edges, in order.
std::optional<CompactOffsets> offsets_fitting(const ReferenceGraph::BlockEdges& saved, std::size_t blocks,
                                              ItemChecks checks) {
  if (saved.offsets.items != blocks || saved.edges.size() >= 0xffffffffu) return std::nullopt;
  return CompactOffsets::viewing(saved.offsets, static_cast<std::uint32_t>(saved.edges.size()), checks);
}

// Whether every edge (a block id, maybe with the interior bit) is one of `blocks` blocks.
bool edges_lead_to_blocks(std::span<const std::uint32_t> edges, std::size_t blocks) {
  return all_below(edges, blocks, ~kInteriorBit);
}

// Whether `referrers` pair every root edge of `roots` with its root range, blocks sorted and in range.
bool fits(const ReferenceGraph::RootReferrers& referrers, std::size_t blocks, const ReferenceGraph::EdgeSlice& roots) {
  const std::size_t ranges = roots.offsets.empty() ? 0 : roots.offsets.size() - 1;
  return referrers.blocks.size() == roots.edges.size() && referrers.roots.size() == roots.edges.size() &&
         std::is_sorted(referrers.blocks.begin(), referrers.blocks.end()) &&
         (referrers.blocks.empty() || referrers.blocks.back() < blocks) &&
         std::all_of(referrers.roots.begin(), referrers.roots.end(), [&](std::uint32_t r) { return r < ranges; });
}

}  // namespace

ReferenceGraph::ReferenceGraph(const Image& image, const BlockIndex& index, const RootSet& roots, SavedArrays arrays,
                               const ObjectHeaders* headers)
    : image_(image), roots_(roots), index_(index), headers_(headers), block_count_(index.blocks().size()) {
  if (!fits(arrays.roots, roots.ranges.size())) throw std::invalid_argument("saved root edges do not fit the roots");
  if (!edges_lead_to_blocks(arrays.roots.edges, block_count_))
    throw std::invalid_argument("saved edges lead outside the heap's blocks");
  reverse_saved_ = arrays.reverse.offsets.items > 0;
  // The forward and the reverse edges checked side by side: passes over every block and edge (unless
  // the file is as heapscope wrote it).
  const bool every_item = arrays.checks == ItemChecks::every_item;
  std::optional<CompactOffsets> forward, reverse;
  bool forward_in_heap = false, reverse_in_heap = false;
  auto check = [&](unsigned direction) {
    const BlockEdges& saved = direction == 0 ? arrays.forward : arrays.reverse;
    (direction == 0 ? forward : reverse) = offsets_fitting(saved, block_count_, arrays.checks);
    (direction == 0 ? forward_in_heap : reverse_in_heap) =
        !every_item || edges_lead_to_blocks(saved.edges, block_count_);
  };
  const unsigned directions = reverse_saved_ ? 2 : 1;
  if (every_item) {
    run_workers(directions, check);
  } else {
    for (unsigned d = 0; d < directions; ++d) check(d);
  }
  if (!forward) throw std::invalid_argument("saved edges do not fit the heap's blocks");
  if (!forward_in_heap) throw std::invalid_argument("saved edges lead outside the heap's blocks");
  if (reverse_saved_) {
    if (!reverse || !reverse_in_heap || !fits(arrays.root_referrers, block_count_, arrays.roots) ||
        arrays.reverse.edges.size() != arrays.forward.edges.size())
      throw std::invalid_argument("saved reverse edges do not fit the forward ones");
    in_offsets_ = std::move(*reverse);
    in_edges_ = U32Array::viewing(arrays.reverse.edges);
    in_root_blocks_ = U32Array::viewing(arrays.root_referrers.blocks);
    in_roots_ = U32Array::viewing(arrays.root_referrers.roots);
  }
  Part all;
  all.first = 0;
  all.last = static_cast<BlockId>(block_count_);
  all.offsets = std::move(*forward);
  all.edges = U32Array::viewing(arrays.forward.edges);
  edge_count_ = all.edges.size();
  parts_.push_back(std::move(all));
  root_offsets_ = U32Array::viewing(arrays.roots.offsets);
  root_targets_ = U32Array::viewing(arrays.roots.edges);
  saved_ = std::move(arrays.keep);
}

std::vector<std::uint32_t> ReferenceGraph::rescan(BlockId b) const {
  std::vector<std::uint32_t> edges;
  MemoryCursor memory(image_);
  scan_block(memory, b, edges);
  return edges;
}

std::vector<std::uint32_t> ReferenceGraph::rescan_root(std::size_t root) const {
  std::vector<std::uint32_t> edges;
  scan_root(root, edges);
  return edges;
}

std::vector<ReferenceGraph::ForwardPart> ReferenceGraph::forward_parts() const {
  std::vector<ForwardPart> out;
  for (const Part& p : parts_) out.push_back({p.first, p.last, &p.offsets, p.edges.span()});
  return out;
}

ReferenceGraph::EdgeSlice ReferenceGraph::root_slice() const {
  return {0, static_cast<std::uint32_t>(root_count()), root_offsets_.span(), root_targets_.span()};
}

CompactOffsets ReferenceGraph::forward_offsets() const {
  CompactOffsets::Builder joined(block_count_);
  for_each_block_edges([&](BlockId, std::span<const std::uint32_t> out) { joined.add(static_cast<std::uint32_t>(out.size())); });
  return joined.finish();
}

const CompactOffsets& ReferenceGraph::reverse_offsets() const {
  build_reverse();
  return in_offsets_;
}

std::span<const std::uint32_t> ReferenceGraph::reverse_edges() const {
  build_reverse();
  return in_edges_.span();
}

ReferenceGraph::RootReferrers ReferenceGraph::root_referrers() const {
  build_reverse();
  return {in_root_blocks_.span(), in_roots_.span()};
}

// The words of `from` that the scan finds pointing into `to` are those whose value lies in to's usable bytes
// (blocks' usable bytes never overlap): compared directly, without a lookup per word, since the block may
// be a table of millions of words.
std::vector<Address> ReferenceGraph::edge_sites(BlockId from, BlockId to) const {
  std::vector<Address> sites;
  const Block& target = index_.blocks()[to];
  if (!is_allocated(target.state)) return sites;
  const Address low = target.address(), high = target.user_end();
  MemoryCursor memory(image_);
  for_each_scanned_range(from, [&](Address start, Address end) {
    for_each_word(memory, start, end, [&](Address at, std::uint64_t word) {
      if (word >= low && word < high) sites.push_back(at);
    });
  });
  return sites;
}

std::vector<Address> ReferenceGraph::root_edge_sites(std::size_t root, BlockId to) const {
  std::vector<Address> sites;
  for_each_root_pointer(roots_.ranges[root], [&](Address at, std::uint64_t, BlockId target) {
    if (target == to) sites.push_back(at);
  });
  return sites;
}

std::span<const std::uint32_t> ReferenceGraph::root_edges(std::size_t root) const {
  return {root_targets_.data() + root_offsets_[root], root_offsets_[root + 1] - root_offsets_[root]};
}

void ReferenceGraph::build_reverse() const {
  std::call_once(reverse_once_, [this] {
    if (reverse_saved_) {
      reverse_built_.store(true, std::memory_order_release);
      return;
    }
    // A byte a block counts each block's in-edges, and then, as they are placed, how many are: the few
    // blocks with 255 or more (an array many blocks point to) count the rest in a map. The offsets are made
    // compact from the counts directly; a full offset per block as the fill's cursor was 4 bytes a block
    // of fresh pages, at the time the dominator tree's depth-first search makes its own arrays.
    std::vector<std::uint8_t> counts(block_count_, 0);
    std::unordered_map<BlockId, std::uint32_t> more;
    auto count = [&](BlockId b) -> std::uint32_t {
      if (counts[b] < 0xff) return counts[b]++;
      return 0xff + more[b]++;
    };
    for (const Part& p : parts_)
      for (std::uint32_t e : p.edges) count(edge_target(e));
    CompactOffsets::Builder offsets(block_count_);
    for (std::size_t b = 0; b < block_count_; ++b) {
      std::uint32_t n = counts[b];
      if (n == 0xff)
        if (const auto it = more.find(static_cast<BlockId>(b)); it != more.end()) n += it->second;
      offsets.add(n);
    }
    in_offsets_ = offsets.finish();
    std::fill(counts.begin(), counts.end(), 0);
    more.clear();
    std::vector<std::uint32_t> in_edges(edge_count_);
    for_each_block_edges([&](BlockId b, std::span<const std::uint32_t> out) {
      for (std::uint32_t e : out) {
        const BlockId to = edge_target(e);
        in_edges[in_offsets_.range(to).first + count(to)] = b | (e & kInteriorBit);
      }
    });
    counts = {};

    // Root edges are few beside blocks: sorted (block, root) pairs, not an offset per block.
    std::vector<std::pair<BlockId, std::uint32_t>> pairs;
    pairs.reserve(root_targets_.size());
    for (std::size_t r = 0; r + 1 < root_offsets_.size(); ++r)
      for (std::uint32_t e : root_edges(r)) pairs.emplace_back(edge_target(e), static_cast<std::uint32_t>(r));
    std::sort(pairs.begin(), pairs.end());
    std::vector<std::uint32_t> blocks(pairs.size()), roots(pairs.size());
    for (std::size_t i = 0; i < pairs.size(); ++i) std::tie(blocks[i], roots[i]) = pairs[i];
    in_edges_ = U32Array(std::move(in_edges));
    in_root_blocks_ = U32Array(std::move(blocks));
    in_roots_ = U32Array(std::move(roots));
    reverse_built_.store(true, std::memory_order_release);
  });
}

std::span<const std::uint32_t> ReferenceGraph::in_root_edges(BlockId b) const {
  build_reverse();
  const auto [first, last] = std::equal_range(in_root_blocks_.begin(), in_root_blocks_.end(), b);
  return {in_roots_.data() + (first - in_root_blocks_.begin()), static_cast<std::size_t>(last - first)};
}

std::size_t ReferenceGraph::memory_bytes() const {
  std::size_t n = index_.memory_bytes() + root_offsets_.owned_bytes() + root_targets_.owned_bytes();
  for (const Part& p : parts_) n += p.offsets.memory_bytes() + p.edges.owned_bytes();
  n += in_offsets_.memory_bytes() + in_edges_.owned_bytes() + in_root_blocks_.owned_bytes() + in_roots_.owned_bytes();
  return n;
}

}  // namespace heapscope
