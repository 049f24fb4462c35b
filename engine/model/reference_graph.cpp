#include "model/reference_graph.h"

#include <algorithm>
#include <stdexcept>
#include <tuple>

#include "base/progress.h"
#include "base/workers.h"

namespace heapscope {

ReferenceGraph::ReferenceGraph(const Image& image, const BlockIndex& index, const RootSet& roots, unsigned workers,
                               const ObjectHeaders* headers)
    : image_(image), roots_(roots), index_(index), headers_(headers), block_count_(index.blocks().size()) {
  const auto& blocks = index.blocks();
  if (blocks.size() >= kInteriorBit) throw std::length_error("more than 2^31 heap blocks");

  // Slices of equal byte volume keep the workers equally busy when block sizes vary.
  const unsigned n = worker_count(blocks.size(), 4096, workers);
  std::uint64_t total_bytes = 0;
  for (const Block& b : blocks) total_bytes += b.chunk_size();
  parts_.resize(n);
  {
    BlockId i = 0;
    std::uint64_t acc = 0;
    for (unsigned p = 0; p < n; ++p) {
      parts_[p].first = i;
      const std::uint64_t goal = total_bytes / n * (p + 1);
      while (i < blocks.size() && (p + 1 == n || acc < goal)) acc += blocks[i++].chunk_size();
      parts_[p].last = i;
    }
  }
  // Progress counts the blocks' bytes; an interrupt (or any failure) in one slice is rethrown once every
  // slice has stopped.
  progress_total(total_bytes);
  auto scan_part = [&](Part& part) {
    part.offsets.reserve(part.last - part.first + 1);
    part.offsets.push_back(0);
    MemoryCursor memory(image_);
    std::uint64_t bytes_since = 0;
    for (BlockId b = part.first; b < part.last; ++b) {
      const Block& blk = blocks[b];
      bytes_since += blk.chunk_size();
      if (bytes_since >= (std::uint64_t{1} << 20)) {
        progress_step(bytes_since);
        bytes_since = 0;
      }
      // A runtime's header links (its GC list) are bookkeeping: the scan starts past them.
      const Address links = headers_ && headers_->has(b) ? headers_->link_bytes : 0;
      if (is_allocated(blk.state))
        for_each_pointer(memory, blk.address() + links, blk.address() + blk.usable_size(),
                         [&](Address, std::uint64_t word, BlockId target) { part.edges.push_back(edge_to(target, word)); });
      if (part.edges.size() >= 0xffffffffu) throw std::length_error("more than 2^32 edges in one slice");
      part.offsets.push_back(static_cast<std::uint32_t>(part.edges.size()));
    }
    part.edges.shrink_to_fit();
  };
  run_workers(n, [&](unsigned p) { scan_part(parts_[p]); });
  for (const Part& p : parts_) edge_count_ += p.edges.size();

  root_offsets_.push_back(0);
  for (const RootRange& r : roots.ranges) {
    for_each_root_pointer(r, [&](Address, std::uint64_t word, BlockId target) {
      root_targets_.push_back(edge_to(target, word));
    });
    root_offsets_.push_back(static_cast<std::uint32_t>(root_targets_.size()));
  }
}

std::vector<Address> ReferenceGraph::edge_sites(BlockId from, BlockId to) const {
  std::vector<Address> sites;
  const Block& b = index_.blocks()[from];
  for_each_pointer(b.address(), b.address() + b.usable_size(), [&](Address at, std::uint64_t, BlockId target) {
    if (target == to) sites.push_back(at);
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

std::span<const std::uint32_t> ReferenceGraph::out_edges(BlockId b) const {
  for (const Part& p : parts_)
    if (b >= p.first && b < p.last) {
      const std::size_t i = b - p.first;
      return {p.edges.data() + p.offsets[i], p.offsets[i + 1] - p.offsets[i]};
    }
  return {};
}

std::span<const std::uint32_t> ReferenceGraph::root_edges(std::size_t root) const {
  return {root_targets_.data() + root_offsets_[root], root_offsets_[root + 1] - root_offsets_[root]};
}

void ReferenceGraph::build_reverse() const {
  std::call_once(reverse_once_, [this] {
    in_offsets_.assign(block_count_ + 1, 0);
    for (const Part& p : parts_)
      for (std::uint32_t e : p.edges) ++in_offsets_[edge_target(e) + 1];
    for (std::size_t i = 1; i < in_offsets_.size(); ++i) in_offsets_[i] += in_offsets_[i - 1];
    in_edges_.resize(edge_count_);
    std::vector<std::uint32_t> fill(in_offsets_.begin(), in_offsets_.end() - 1);
    for (const Part& p : parts_)
      for (BlockId b = p.first; b < p.last; ++b)
        for (std::uint32_t e : out_edges(b)) in_edges_[fill[edge_target(e)]++] = b | (e & kInteriorBit);

    // Root edges are few beside blocks: sorted (block, root) pairs, not an offset per block.
    std::vector<std::pair<BlockId, std::uint32_t>> pairs;
    pairs.reserve(root_targets_.size());
    for (std::size_t r = 0; r + 1 < root_offsets_.size(); ++r)
      for (std::uint32_t e : root_edges(r)) pairs.emplace_back(edge_target(e), static_cast<std::uint32_t>(r));
    std::sort(pairs.begin(), pairs.end());
    in_root_blocks_.resize(pairs.size());
    in_roots_.resize(pairs.size());
    for (std::size_t i = 0; i < pairs.size(); ++i) std::tie(in_root_blocks_[i], in_roots_[i]) = pairs[i];
  });
}

std::span<const std::uint32_t> ReferenceGraph::in_edges(BlockId b) const {
  build_reverse();
  return {in_edges_.data() + in_offsets_[b], in_offsets_[b + 1] - in_offsets_[b]};
}

std::span<const std::uint32_t> ReferenceGraph::in_root_edges(BlockId b) const {
  build_reverse();
  const auto [first, last] = std::equal_range(in_root_blocks_.begin(), in_root_blocks_.end(), b);
  return {in_roots_.data() + (first - in_root_blocks_.begin()), static_cast<std::size_t>(last - first)};
}

std::size_t ReferenceGraph::memory_bytes() const {
  std::size_t n = index_.memory_bytes() + root_offsets_.capacity() * 4 + root_targets_.capacity() * 4;
  for (const Part& p : parts_) n += p.offsets.capacity() * 4 + p.edges.capacity() * 4;
  n += (in_offsets_.capacity() + in_edges_.capacity() + in_root_blocks_.capacity() + in_roots_.capacity()) * 4;
  return n;
}

}  // namespace heapscope
