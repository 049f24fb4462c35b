#include "model/retention.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <stdexcept>
#include <tuple>

#include "image/word_scan.h"
#include "base/phase_timer.h"

namespace heapscope {

namespace {

// Root kinds known today, plus any a newer roots.h adds after them.
std::size_t root_kind_count(const RootSet& roots) {
  std::size_t n = static_cast<std::size_t>(RootKind::finalizer) + 1;
  for (const RootRange& r : roots.ranges) n = std::max(n, static_cast<std::size_t>(r.kind) + 1);
  return n;
}

// The root nodes and their edges to blocks, in CSR form: node i's blocks are targets[offsets[i] ..
// offsets[i + 1]).
struct RootNodeEdges {
  std::vector<RootNode> nodes;
  std::vector<std::uint32_t> offsets, targets;
};

// Groups the root ranges into root nodes (see retention.h) and collects each node's edges.
class RootNodeBuilder {
 public:
  RootNodeBuilder(const Image& image, const SymbolIndex& symbols, const ReferenceGraph& graph,
                  const std::vector<std::vector<Frame>>* frames)
      : image_(image), symbols_(symbols), graph_(graph), frames_(frames) {}

  RootNodeEdges build(const RootSet& roots) {
    for (std::size_t r = 0; r < roots.ranges.size(); ++r) {
      const RootRange& range = roots.ranges[r];
      if (range.kind == RootKind::global && split_by_symbol(range)) continue;
      if (range.kind == RootKind::stack && split_by_frame(range)) continue;
      const std::uint32_t node = node_for_range(range);
      for (std::uint32_t e : graph_.root_edges(r)) edges_.emplace_back(node, edge_target(e));
    }
    RootNodeEdges out;
    out.offsets.assign(nodes_.size() + 1, 0);
    for (const auto& [node, block] : edges_) ++out.offsets[node + 1];
    for (std::size_t i = 1; i < out.offsets.size(); ++i) out.offsets[i] += out.offsets[i - 1];
    out.targets.resize(edges_.size());
    std::vector<std::uint32_t> fill(out.offsets.begin(), out.offsets.end() - 1);
    for (const auto& [node, block] : edges_) out.targets[fill[node]++] = block;
    out.nodes = std::move(nodes_);
    return out;
  }

 private:
  using Key = std::tuple<int, std::uint64_t, std::uint64_t>;

  std::uint32_t node(const Key& key, RootNode proto) {
    auto [it, fresh] = by_key_.try_emplace(key, static_cast<std::uint32_t>(nodes_.size()));
    if (fresh) nodes_.push_back(std::move(proto));
    return it->second;
  }

  std::uint32_t node_for_range(const RootRange& r) {
    RootNode n;
    n.kind = r.kind;
    const int kind = static_cast<int>(r.kind);
    switch (r.kind) {
      case RootKind::registers:
      case RootKind::stack:
      case RootKind::tls: {
        // One node per thread and kind.
        n.thread = r.thread;
        n.label = thread_root_label(r.kind, thread_label(image_, r.thread));
        return node({kind, r.thread, 0}, std::move(n));
      }
      case RootKind::dynamic_tls:
        n.thread = r.thread;
        n.label = fmt::format("{}, module id {}", thread_root_label(r.kind, thread_label(image_, r.thread)), r.anchor);
        return node({kind, r.thread, r.anchor}, std::move(n));
      case RootKind::global:
        if (r.module != RootRange::kNoModule) return module_globals_node(r.module, nullptr);
        n.address = r.start;
        n.label = fmt::format("writable mapping of {}", r.label);
        return node({kind, RootRange::kNoModule, r.start}, std::move(n));
      case RootKind::finalizer:
        n.thread = r.thread;
        n.finalizer = static_cast<std::uint32_t>(r.anchor);
        n.address = r.start;
        n.label = r.label;
        return node({kind, r.anchor, 0}, std::move(n));
      case RootKind::exited_thread:
        n.address = r.anchor;
        n.label = fmt::format("descriptor of exited thread 0x{:x}", r.anchor);
        return node({kind, r.anchor, 0}, std::move(n));
      case RootKind::anonymous:
      default: {
        // Ranges of one mapping (split around heap memory) are one root.
        const MemoryRegion* region = image_.region_at(r.start);
        n.address = region ? region->start : r.start;
        const Address end = region ? region->end : r.end;
        n.label = r.kind == RootKind::anonymous ? fmt::format("anonymous mapping 0x{:x}-0x{:x}", n.address, end)
                                                : fmt::format("{} root 0x{:x}-0x{:x}", root_kind_name(r.kind), n.address, end);
        return node({kind, n.address, 0}, std::move(n));
      }
    }
  }

  // The node of one global variable (`symbol`), or of a module's globals no symbol covers (null).
  std::uint32_t module_globals_node(std::uint32_t module, const Symbol* symbol) {
    RootNode n;
    n.kind = RootKind::global;
    const auto& modules = image_.modules();
    const Module* mod = module < modules.size() ? &modules[module] : nullptr;
    n.module = mod ? std::string(mod->name()) : fmt::format("module {}", module);
    if (symbol) {
      n.symbol = demangle(symbol->name);
      n.address = (mod ? mod->load_bias : 0) + symbol->value;
      n.label = global_root_label(n.symbol, n.module);
    } else {
      n.label = symbols_for(module) ? fmt::format("globals of {} outside any symbol", n.module)
                                    : fmt::format("globals of {}", n.module);
    }
    return node({static_cast<int>(RootKind::global), module, reinterpret_cast<std::uintptr_t>(symbol)}, std::move(n));
  }

  const ModuleSymbols* symbols_for(std::uint32_t module) const {
    const auto& modules = image_.modules();
    if (module >= modules.size() || modules[module].file_on_disk.empty()) return nullptr;
    return symbols_.symbols_for(modules[module]);
  }

  // Rescans a module's global range word by word (as the graph's scan did) and gives each pointer to
  // the variable whose symbol covers its word. False when the module has no symbols to split by.
  bool split_by_symbol(const RootRange& r) {
    const ModuleSymbols* syms = symbols_for(r.module);
    if (!syms) return false;
    const Address bias = image_.modules()[r.module].load_bias;
    graph_.for_each_pointer(r.start, r.end, [&](Address at, std::uint64_t, BlockId target) {
      edges_.emplace_back(module_globals_node(r.module, syms->covering(at - bias)), target);
    });
    return true;
  }

  // Rescans a thread's stack word by word and gives each pointer to the frame (and local variable) that
  // holds its word; words outside every frame go to the thread's stack node. False without frames.
  bool split_by_frame(const RootRange& r) {
    if (!frames_ || r.thread >= frames_->size() || (*frames_)[r.thread].empty()) return false;
    const std::vector<Frame>& frames = (*frames_)[r.thread];
    graph_.for_each_pointer(r.start, r.end, [&](Address at, std::uint64_t, BlockId target) {
      std::size_t f = 0;
      const Frame* frame = frame_covering(frames, at, &f);
      edges_.emplace_back(frame ? frame_node(r.thread, f, *frame, frame->variable_at(at)) : node_for_range(r), target);
    });
    return true;
  }

  std::uint32_t frame_node(std::uint32_t thread, std::size_t index, const Frame& frame, const FrameVariable* variable) {
    RootNode n;
    n.kind = RootKind::stack;
    n.thread = thread;
    n.frame = static_cast<std::uint32_t>(index);
    n.variable = variable ? variable->name : "";
    n.label = frame_root_label(thread_label(image_, thread), index, frame, n.variable, LabelDetail::exact);
    const std::uint64_t variable_key = variable ? static_cast<std::uint64_t>(variable - frame.variables.data()) + 1 : 0;
    return node({static_cast<int>(RootKind::stack), thread, (std::uint64_t{n.frame} << 32) | variable_key}, std::move(n));
  }

  const Image& image_;
  const SymbolIndex& symbols_;
  const ReferenceGraph& graph_;
  const std::vector<std::vector<Frame>>* frames_;
  std::vector<RootNode> nodes_;
  std::map<Key, std::uint32_t> by_key_;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> edges_;  // (root node, block)
};

// The reference graph as the dominator computation sees it, with the root nodes, one node per kind
// and the super-root added in front; block edges are read from the graph's own CSR arrays.
class RetentionGraph final : public DominatorGraph {
 public:
  RetentionGraph(const ReferenceGraph& graph, const std::vector<RootNode>& roots, std::size_t kinds,
                 std::vector<std::uint32_t> root_offsets, std::vector<std::uint32_t> root_targets)
      : graph_(graph),
        blocks_(static_cast<std::uint32_t>(graph.block_count())),
        roots_(static_cast<std::uint32_t>(roots.size())),
        kinds_(static_cast<std::uint32_t>(kinds)),
        root_offsets_(std::move(root_offsets)),
        root_targets_(std::move(root_targets)) {
    if (std::uint64_t{blocks_} + roots_ + kinds_ + 1 > kNodeMask) throw std::length_error("too many heap blocks");
    group_roots_by_kind(roots);
    index_root_predecessors();
  }

  std::uint32_t super_root() const { return blocks_ + roots_ + kinds_; }
  std::uint32_t node_count() const override { return super_root() + 1; }

  std::span<const std::uint32_t> successors(std::uint32_t v) const override {
    if (v < blocks_) return graph_.out_edges(v);
    v -= blocks_;
    if (v < roots_) return span_of(root_targets_, root_offsets_, v);
    v -= roots_;
    if (v < kinds_) return span_of(kind_children_, kind_offsets_, v);
    return kind_nodes_;
  }

  AdjacentLists predecessors(std::uint32_t v) const override {
    if (v < blocks_) return {graph_.in_edges(v), root_predecessors(v)};
    if (v < blocks_ + roots_) return {{&root_parent_[v - blocks_], 1}, {}};
    if (v < super_root()) return {{&super_root_, 1}, {}};
    return {};
  }

 private:
  static std::span<const std::uint32_t> span_of(const std::vector<std::uint32_t>& items,
                                                const std::vector<std::uint32_t>& offsets, std::uint32_t i) {
    return {items.data() + offsets[i], offsets[i + 1] - offsets[i]};
  }

  void group_roots_by_kind(const std::vector<RootNode>& roots) {
    kind_offsets_.assign(kinds_ + 1, 0);
    for (const RootNode& r : roots) ++kind_offsets_[static_cast<std::size_t>(r.kind) + 1];
    for (std::size_t i = 1; i < kind_offsets_.size(); ++i) kind_offsets_[i] += kind_offsets_[i - 1];
    kind_children_.resize(roots.size());
    root_parent_.resize(roots.size());
    std::vector<std::uint32_t> fill(kind_offsets_.begin(), kind_offsets_.end() - 1);
    for (std::uint32_t i = 0; i < roots_; ++i) {
      const auto kind = static_cast<std::uint32_t>(roots[i].kind);
      kind_children_[fill[kind]++] = blocks_ + i;
      root_parent_[i] = blocks_ + roots_ + kind;
    }
    for (std::uint32_t k = 0; k < kinds_; ++k) kind_nodes_.push_back(blocks_ + roots_ + k);
    super_root_ = super_root();
  }

  // Root → block edges reversed: (block, root node) sorted by block, and a bit per block that has any,
  // so the millions of blocks no root points to skip the search.
  void index_root_predecessors() {
    std::vector<std::pair<std::uint32_t, std::uint32_t>> pairs;
    pairs.reserve(root_targets_.size());
    for (std::uint32_t r = 0; r < roots_; ++r)
      for (std::uint32_t t : span_of(root_targets_, root_offsets_, r)) pairs.emplace_back(t, blocks_ + r);
    std::sort(pairs.begin(), pairs.end());
    has_root_predecessor_.assign((blocks_ + 63) / 64, 0);
    pred_blocks_.reserve(pairs.size());
    pred_roots_.reserve(pairs.size());
    for (const auto& [block, node] : pairs) {
      has_root_predecessor_[block / 64] |= std::uint64_t{1} << (block % 64);
      pred_blocks_.push_back(block);
      pred_roots_.push_back(node);
    }
  }

  std::span<const std::uint32_t> root_predecessors(std::uint32_t block) const {
    if (!(has_root_predecessor_[block / 64] >> (block % 64) & 1)) return {};
    const auto [lo, hi] = std::equal_range(pred_blocks_.begin(), pred_blocks_.end(), block);
    return {pred_roots_.data() + (lo - pred_blocks_.begin()), static_cast<std::size_t>(hi - lo)};
  }

  const ReferenceGraph& graph_;
  std::uint32_t blocks_, roots_, kinds_;
  std::vector<std::uint32_t> root_offsets_, root_targets_;
  std::vector<std::uint32_t> kind_offsets_, kind_children_, kind_nodes_, root_parent_;
  std::uint32_t super_root_ = 0;
  std::vector<std::uint64_t> has_root_predecessor_;
  std::vector<std::uint32_t> pred_blocks_, pred_roots_;
};

}  // namespace

Retention::Retention(const Image& image, const SymbolIndex& symbols, const HeapModel& heap, const RootSet& roots,
                     const ReferenceGraph& graph, const std::vector<std::vector<Frame>>* frames)
    : block_count_(static_cast<std::uint32_t>(graph.block_count())) {
  if (block_count_ > 0) {
    PhaseTimer timer("dominators: reverse edges");
    (void)graph.in_edges(0);  // built on first use; timed apart, as other commands share them
  }
  RootNodeEdges root_edges;
  {
    PhaseTimer timer("dominators: root nodes");
    root_edges = RootNodeBuilder(image, symbols, graph, frames).build(roots);
    root_nodes_ = std::move(root_edges.nodes);
  }
  {
    PhaseTimer timer("dominators: Lengauer-Tarjan");
    const RetentionGraph g(graph, root_nodes_, root_kind_count(roots), std::move(root_edges.offsets),
                           std::move(root_edges.targets));
    Dominators d = compute_dominators(g, g.super_root());
    idom_ = std::move(d.idom);
    preorder_ = std::move(d.preorder);
  }

  sum_retained_sizes(heap);
}

// Sizes flow up the dominator tree: each node comes after its dominator in preorder, so backwards.
void Retention::sum_retained_sizes(const HeapModel& heap) {
  retained_bytes_.assign(idom_.size(), 0);
  retained_blocks_.assign(idom_.size(), 0);
  for (std::uint32_t b = 0; b < block_count_; ++b) {
    const Block& blk = heap.blocks[b];
    if (!is_allocated(blk.state)) continue;
    in_use_bytes_ += blk.usable_size();
    ++in_use_blocks_;
    retained_bytes_[b] = blk.usable_size();
    retained_blocks_[b] = 1;
  }
  for (std::size_t i = preorder_.size(); i-- > 1;) {
    const std::uint32_t v = preorder_[i], up = idom_[v];
    retained_bytes_[up] += retained_bytes_[v];
    retained_blocks_[up] += retained_blocks_[v];
  }
}

std::size_t Retention::memory_bytes() const {
  return idom_.capacity() * 4 + preorder_.capacity() * 4 + retained_bytes_.capacity() * 8 +
         retained_blocks_.capacity() * 4;
}

}  // namespace heapscope
