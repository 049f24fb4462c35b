#include "model/retention.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <unordered_map>
#include <stdexcept>
#include <tuple>

#include "base/bit_array.h"
#include "base/bounded_scan.h"
#include "base/workers.h"
#include "image/word_scan.h"
#include "model/retention_edges.h"
#include "base/phase_timer.h"

namespace heapscope {

namespace {

using Level = RootNode::Level;

// The ownership tree's nodes and their edges to blocks, in CSR form: node i's blocks are
// targets[offsets[i] .. offsets[i + 1]).
struct RootNodeEdges {
  std::vector<RootNode> nodes;
  std::vector<std::uint32_t> offsets, targets;
};

// Builds the ownership tree (see retention.h) over the root ranges and gives each node its edges.
class RootNodeBuilder {
 public:
  RootNodeBuilder(const Image& image, const SymbolIndex& symbols, const ReferenceGraph& graph,
                  const RetentionEdges& holding, const std::vector<std::vector<Frame>>* frames)
      : image_(image), symbols_(symbols), graph_(graph), holding_(holding), frames_(frames) {}

  RootNodeEdges build(const RootSet& roots) {
    const std::set<std::pair<std::uint32_t, BlockId>> on_stacks = stack_targets(roots);
    // Each stack's pointers placed in their frames once: which variables hold what decides who the
    // other words' copies are charged to.
    std::vector<std::vector<StackWord>> stack_words(roots.ranges.size());
    for (std::size_t r = 0; r < roots.ranges.size(); ++r)
      if (roots.ranges[r].kind == RootKind::stack) stack_words[r] = place_in_frames(roots.ranges[r]);
    // Likewise an interpreter frame's value stack: what a local of the frame holds is the local's.
    std::set<std::pair<Address, BlockId>> held_by_locals;  // (frame, block)
    for (std::size_t r = 0; r < roots.ranges.size(); ++r)
      if (roots.ranges[r].kind == RootKind::interpreter_frame && !roots.ranges[r].part.empty())
        for (std::uint32_t e : graph_.root_edges(r)) held_by_locals.emplace(roots.ranges[r].anchor, edge_target(e));
    for (std::size_t r = 0; r < roots.ranges.size(); ++r) {
      const RootRange& range = roots.ranges[r];
      if (range.kind == RootKind::global && split_by_symbol(range)) continue;
      if (range.kind == RootKind::stack && split_by_frame(range, stack_words[r])) continue;
      const std::uint32_t node = node_for_range(range);
      for (std::uint32_t e : graph_.root_edges(r)) {
        // A register holding what its own thread's stack holds is a working copy; the stack slot (a
        // frame's variable) is where the pointer lives, and the one to charge.
        if (range.kind == RootKind::registers && on_stacks.contains({range.thread, edge_target(e)})) continue;
        if (range.kind == RootKind::interpreter_frame && range.part.empty() &&
            held_by_locals.contains({range.anchor, edge_target(e)}))
          continue;
        hold(node, range, edge_target(e));
      }
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
  // Node `node`, for a word of root range `range`, holds `target`, unless that pointer is borrowed.
  void hold(std::uint32_t node, const RootRange& range, BlockId target) {
    if (holding_.root_holds(range, target)) edges_.emplace_back(node, target);
  }

  // (thread, block) for every block a thread's stack points to.
  std::set<std::pair<std::uint32_t, BlockId>> stack_targets(const RootSet& roots) const {
    std::set<std::pair<std::uint32_t, BlockId>> out;
    for (std::size_t r = 0; r < roots.ranges.size(); ++r)
      if (roots.ranges[r].kind == RootKind::stack)
        for (std::uint32_t e : graph_.root_edges(r)) out.emplace(roots.ranges[r].thread, edge_target(e));
    return out;
  }

  // What a node is, for finding it again: (what, owner, detail).
  enum class What { kind, thread, thread_part, dynamic_tls_module, frame, variable, module, global_variable,
                    file_mapping, finalizer, exited_thread, anonymous, interpreter_frame, interpreter_local };
  using Key = std::tuple<What, std::uint64_t, std::uint64_t>;

  // The node for `key`, made from `proto` under `parent` the first time.
  std::uint32_t node(const Key& key, RootNode proto, std::uint32_t parent) {
    auto [it, fresh] = by_key_.try_emplace(key, static_cast<std::uint32_t>(nodes_.size()));
    if (fresh) {
      proto.parent = parent;
      if (parent != RootNode::kNoParent) proto.owner_kind = nodes_[parent].owner_kind;
      nodes_.push_back(std::move(proto));
    }
    return it->second;
  }

  static RootNode proto(Level level, RootKind kind, std::string label) {
    RootNode n;
    n.level = level;
    n.kind = kind;
    n.label = std::move(label);
    return n;
  }

  std::uint32_t kind_node(OwnerKind owner_kind) {
    RootNode n = proto(Level::kind, RootKind::global, owner_kind_name(owner_kind));
    n.owner_kind = owner_kind;
    return node({What::kind, static_cast<std::uint64_t>(owner_kind), 0}, std::move(n), RootNode::kNoParent);
  }

  std::uint32_t thread_node(std::uint32_t thread) {
    RootNode n = proto(Level::owner, RootKind::stack, thread_label(image_, thread));
    n.thread = thread;
    return node({What::thread, thread, 0}, std::move(n), kind_node(OwnerKind::thread));
  }

  // A thread's registers, stack, static TLS or dynamic TLS.
  std::uint32_t thread_part(std::uint32_t thread, RootKind kind) {
    RootNode n = proto(Level::part, kind, thread_root_label(kind, thread_label(image_, thread)));
    n.thread = thread;
    return node({What::thread_part, thread, static_cast<std::uint64_t>(kind)}, std::move(n), thread_node(thread));
  }

  std::uint32_t node_for_range(const RootRange& r) {
    switch (r.kind) {
      case RootKind::registers:
      case RootKind::stack:
      case RootKind::tls: return thread_part(r.thread, r.kind);
      case RootKind::dynamic_tls: {
        RootNode n = proto(Level::part, r.kind,
                           fmt::format("{}, module id {}", thread_root_label(r.kind, thread_label(image_, r.thread)), r.anchor));
        n.thread = r.thread;
        return node({What::dynamic_tls_module, r.thread, r.anchor}, std::move(n), thread_part(r.thread, r.kind));
      }
      case RootKind::global: {
        if (r.module != RootRange::kNoModule) return module_node(r.module);
        RootNode n = proto(Level::owner, r.kind, fmt::format("writable mapping of {}", r.label));
        n.address = r.start;
        return node({What::file_mapping, r.start, 0}, std::move(n), kind_node(OwnerKind::global));
      }
      case RootKind::finalizer: return finalizer_node(r);
      case RootKind::interpreter_frame: return interpreter_frame_node(r);
      case RootKind::exited_thread: {
        RootNode n = proto(Level::owner, r.kind, fmt::format("descriptor of exited thread 0x{:x}", r.anchor));
        n.address = r.anchor;
        return node({What::exited_thread, r.anchor, 0}, std::move(n), kind_node(OwnerKind::exited_thread));
      }
      case RootKind::anonymous:
      default: {
        // Ranges of one mapping (split around heap memory) are one root.
        const MemoryRegion* region = image_.region_at(r.start);
        const Address start = region ? region->start : r.start, end = region ? region->end : r.end;
        RootNode n = proto(Level::owner, RootKind::anonymous, fmt::format("anonymous mapping 0x{:x}-0x{:x}", start, end));
        n.address = start;
        return node({What::anonymous, start, 0}, std::move(n), kind_node(OwnerKind::anonymous));
      }
    }
  }

  // A registration tied to a live thread (a thread_local object, key data) lives in that thread's static
  // TLS or descriptor: a part of the thread. Process-wide ones are owners of their own.
  std::uint32_t finalizer_node(const RootRange& r) {
    const bool of_live_thread = r.thread < image_.threads().size();
    RootNode n = proto(of_live_thread ? Level::part : Level::owner, r.kind, r.label);
    n.thread = of_live_thread ? r.thread : RootNode::kNoThread;
    n.finalizer = static_cast<std::uint32_t>(r.anchor);
    n.address = r.start;
    const std::uint32_t parent = of_live_thread ? thread_part(r.thread, RootKind::tls) : kind_node(OwnerKind::finalizer);
    return node({What::finalizer, r.anchor, 0}, std::move(n), parent);
  }

  // A Python frame is a part of its thread (of the anonymous memory it lies in when its thread is not
  // seen); a local, of its frame.
  std::uint32_t interpreter_frame_node(const RootRange& r) {
    const bool of_thread = r.thread != RootRange::kNoThread;
    const std::string thread = interpreter_thread_label(image_, r.thread);
    RootNode frame = proto(Level::part, r.kind, interpreter_frame_label(thread, r.label, ""));
    frame.thread = of_thread ? r.thread : RootNode::kNoThread;
    frame.frame = static_cast<std::uint32_t>(r.anchor);
    const std::uint32_t parent = of_thread ? thread_node(r.thread) : kind_node(OwnerKind::anonymous);
    const std::uint32_t frame_node = node({What::interpreter_frame, r.anchor, 0}, frame, parent);
    if (r.part.empty()) return frame_node;
    RootNode local = std::move(frame);
    local.label = interpreter_frame_label(thread, r.label, r.part);
    local.variable = r.part;
    return node({What::interpreter_local, r.anchor, r.start}, std::move(local), frame_node);
  }

  std::string module_name(std::uint32_t module) const {
    const auto& modules = image_.modules();
    return module < modules.size() ? std::string(modules[module].name()) : fmt::format("module {}", module);
  }

  // A module's globals: the owner of its variables and of the words no symbol covers.
  std::uint32_t module_node(std::uint32_t module) {
    RootNode n = proto(Level::owner, RootKind::global, fmt::format("globals of {}", module_name(module)));
    n.module = module_name(module);
    return node({What::module, module, 0}, std::move(n), kind_node(OwnerKind::global));
  }

  std::uint32_t global_variable_node(std::uint32_t module, const Symbol& symbol) {
    RootNode n = proto(Level::part, RootKind::global, "");
    n.module = module_name(module);
    n.symbol = demangle(symbol.name);
    const auto& modules = image_.modules();
    n.address = (module < modules.size() ? modules[module].load_bias : 0) + symbol.value;
    n.label = global_root_label(n.symbol, n.module);
    return node({What::global_variable, module, reinterpret_cast<std::uintptr_t>(&symbol)}, std::move(n),
                module_node(module));
  }

  const ModuleSymbols* symbols_for(std::uint32_t module) const {
    const auto& modules = image_.modules();
    if (module >= modules.size() || modules[module].file_on_disk.empty()) return nullptr;
    return symbols_.symbols_for(modules[module]);
  }

  // Rescans a module's global range word by word (as the graph's scan did) and gives each pointer to
  // the variable whose symbol covers its word, or to the module. False when the module has no symbols.
  bool split_by_symbol(const RootRange& r) {
    const ModuleSymbols* syms = symbols_for(r.module);
    if (!syms) return false;
    const Address bias = image_.modules()[r.module].load_bias;
    graph_.for_each_pointer(r.start, r.end, [&](Address at, std::uint64_t, BlockId target) {
      const Symbol* symbol = syms->covering(at - bias);
      hold(symbol ? global_variable_node(r.module, *symbol) : module_node(r.module), r, target);
    });
    return true;
  }

  // A pointer on a thread's stack and where the unwind puts its word.
  struct StackWord {
    BlockId target = kNoBlock;
    std::size_t frame_index = 0;
    const Frame* frame = nullptr;             // null: outside every frame
    const FrameVariable* variable = nullptr;  // null: in no named local
  };

  // Rescans a thread's stack word by word and places each pointer in its frame and local variable;
  // records (thread, block) for what a variable holds. Nothing without frames.
  std::vector<StackWord> place_in_frames(const RootRange& r) {
    std::vector<StackWord> words;
    if (!frames_ || r.thread >= frames_->size() || (*frames_)[r.thread].empty()) return words;
    const std::vector<Frame>& frames = (*frames_)[r.thread];
    graph_.for_each_pointer(r.start, r.end, [&](Address at, std::uint64_t, BlockId target) {
      StackWord w;
      w.target = target;
      w.frame = frame_covering(frames, at, &w.frame_index);
      w.variable = w.frame ? w.frame->variable_at(at) : nullptr;
      if (w.variable) variable_targets_.emplace(r.thread, target);
      words.push_back(w);
    });
    return words;
  }

  // Gives each of a stack's pointers (`words`, from place_in_frames) to the local variable or frame that
  // holds its word; words outside every frame go to the thread's stack. False without frames.
  bool split_by_frame(const RootRange& r, const std::vector<StackWord>& words) {
    if (!frames_ || r.thread >= frames_->size() || (*frames_)[r.thread].empty()) return false;
    for (const StackWord& w : words) {
      // A stack word no variable covers (a saved register, a spill, a temporary) that holds what one of the
      // thread's variables holds is a copy of it: the variable is charged.
      if (!w.variable && variable_targets_.contains({r.thread, w.target})) continue;
      const std::uint32_t holder = !w.frame      ? thread_part(r.thread, RootKind::stack)
                                   : w.variable ? variable_node(r.thread, w.frame_index, *w.frame, *w.variable)
                                                : frame_node(r.thread, w.frame_index, *w.frame);
      hold(holder, r, w.target);
    }
    return true;
  }

  std::uint32_t frame_node(std::uint32_t thread, std::size_t index, const Frame& frame) {
    RootNode n = proto(Level::part, RootKind::stack,
                       frame_root_label(thread_label(image_, thread), index, frame, "", LabelDetail::exact));
    n.thread = thread;
    n.frame = static_cast<std::uint32_t>(index);
    return node({What::frame, thread, index}, std::move(n), thread_part(thread, RootKind::stack));
  }

  std::uint32_t variable_node(std::uint32_t thread, std::size_t index, const Frame& frame, const FrameVariable& variable) {
    RootNode n = proto(Level::part, RootKind::stack,
                       frame_root_label(thread_label(image_, thread), index, frame, variable.name, LabelDetail::exact));
    n.thread = thread;
    n.frame = static_cast<std::uint32_t>(index);
    n.variable = variable.name;
    const auto which = static_cast<std::uint64_t>(&variable - frame.variables.data());
    return node({What::variable, thread, (std::uint64_t{n.frame} << 32) | which}, std::move(n),
                frame_node(thread, index, frame));
  }

  const Image& image_;
  const SymbolIndex& symbols_;
  const ReferenceGraph& graph_;
  const RetentionEdges& holding_;
  const std::vector<std::vector<Frame>>* frames_;
  std::vector<RootNode> nodes_;
  std::map<Key, std::uint32_t> by_key_;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> edges_;  // (root node, block)
  std::set<std::pair<std::uint32_t, BlockId>> variable_targets_;  // (thread, block) a local variable holds
};

// The reference graph as the dominator computation sees it, with the ownership tree and the super-root
// added in front; block edges are the ones that hold (RetentionEdges), read from the graph's CSR arrays.
class RetentionGraph final : public DominatorGraph {
 public:
  RetentionGraph(const ReferenceGraph& graph, const RetentionEdges& edges, const std::vector<RootNode>& roots,
                 const std::vector<std::uint32_t>& root_offsets, const std::vector<std::uint32_t>& root_targets)
      : edges_(edges),
        blocks_(static_cast<std::uint32_t>(graph.block_count())),
        roots_(static_cast<std::uint32_t>(roots.size())) {
    if (std::uint64_t{blocks_} + roots_ + 1 > kNodeMask) throw std::length_error("too many heap blocks");
    link_tree(roots, root_offsets, root_targets);
    index_root_predecessors(root_offsets, root_targets);
  }

  std::uint32_t super_root() const { return blocks_ + roots_; }
  std::uint32_t node_count() const override { return super_root() + 1; }
  // The super-root's first successor is the globals' kind node when there is one (link_tree): what it
  // reaches, what globals hold, is theirs (retention_edges.h).
  FirstReach first_reach() const { return globals_first_ ? FirstReach::owned : FirstReach::shared; }

  std::span<const std::uint32_t> successors(std::uint32_t v) const override {
    if (v < blocks_) return edges_.out_edges(v);
    if (v < super_root()) return span_of(root_successors_, root_offsets_, v - blocks_);
    return top_nodes_;
  }

  AdjacentLists predecessors(std::uint32_t v) const override {
    if (v < blocks_) return {edges_.in_edges(v), root_predecessors(v)};
    if (v < super_root()) return {{&root_parent_[v - blocks_], 1}, {}};
    return {};
  }

 private:
  static std::span<const std::uint32_t> span_of(const std::vector<std::uint32_t>& items,
                                                const std::vector<std::uint32_t>& offsets, std::uint32_t i) {
    return {items.data() + offsets[i], offsets[i + 1] - offsets[i]};
  }

  // Each tree node's successors: its child nodes, then the blocks its own words point to.
  void link_tree(const std::vector<RootNode>& roots, const std::vector<std::uint32_t>& offsets,
                 const std::vector<std::uint32_t>& targets) {
    root_parent_.resize(roots_);
    std::vector<std::uint32_t> children(roots_ + 1, 0);
    for (std::uint32_t i = 0; i < roots_; ++i) {
      const std::uint32_t parent = roots[i].parent;
      root_parent_[i] = parent == RootNode::kNoParent ? super_root() : blocks_ + parent;
      if (parent == RootNode::kNoParent) top_nodes_.push_back(blocks_ + i);
      else ++children[parent + 1];
    }
    // The owner kinds, the globals' first: the search enters what globals hold before anything else.
    const auto is_globals = [&](std::uint32_t node) {
      const RootNode& n = roots[node - blocks_];
      return n.level == Level::kind && n.owner_kind == OwnerKind::global;
    };
    std::stable_partition(top_nodes_.begin(), top_nodes_.end(), is_globals);
    globals_first_ = !top_nodes_.empty() && is_globals(top_nodes_.front());
    root_offsets_.assign(roots_ + 1, 0);
    for (std::uint32_t i = 0; i < roots_; ++i)
      root_offsets_[i + 1] = root_offsets_[i] + children[i + 1] + (offsets[i + 1] - offsets[i]);
    root_successors_.resize(root_offsets_.back());
    std::vector<std::uint32_t> fill(root_offsets_.begin(), root_offsets_.end() - 1);
    for (std::uint32_t i = 0; i < roots_; ++i)
      if (roots[i].parent != RootNode::kNoParent) root_successors_[fill[roots[i].parent]++] = blocks_ + i;
    for (std::uint32_t i = 0; i < roots_; ++i)
      for (std::uint32_t t : span_of(targets, offsets, i)) root_successors_[fill[i]++] = t;
  }

  // Root → block edges reversed: (block, root node) sorted by block, and a bit per block that has any,
  // so the millions of blocks no root points to skip the search.
  void index_root_predecessors(const std::vector<std::uint32_t>& offsets, const std::vector<std::uint32_t>& targets) {
    std::vector<std::pair<std::uint32_t, std::uint32_t>> pairs;
    pairs.reserve(targets.size());
    for (std::uint32_t r = 0; r < roots_; ++r)
      for (std::uint32_t t : span_of(targets, offsets, r)) pairs.emplace_back(t, blocks_ + r);
    std::sort(pairs.begin(), pairs.end());
    has_root_predecessor_ = BitArray(blocks_);
    pred_blocks_.reserve(pairs.size());
    pred_roots_.reserve(pairs.size());
    for (const auto& [block, node] : pairs) {
      has_root_predecessor_.set(block);
      pred_blocks_.push_back(block);
      pred_roots_.push_back(node);
    }
  }

  std::span<const std::uint32_t> root_predecessors(std::uint32_t block) const {
    if (!has_root_predecessor_.test(block)) return {};
    const auto [lo, hi] = std::equal_range(pred_blocks_.begin(), pred_blocks_.end(), block);
    return {pred_roots_.data() + (lo - pred_blocks_.begin()), static_cast<std::size_t>(hi - lo)};
  }

  const RetentionEdges& edges_;
  std::uint32_t blocks_, roots_;
  bool globals_first_ = false;
  std::vector<std::uint32_t> root_offsets_, root_successors_, root_parent_, top_nodes_;
  BitArray has_root_predecessor_;
  std::vector<std::uint32_t> pred_blocks_, pred_roots_;
};

}  // namespace

const char* owner_kind_name(OwnerKind k) {
  switch (k) {
    case OwnerKind::thread: return "thread";
    case OwnerKind::global: return "global";
    case OwnerKind::finalizer: return "finalizer";
    case OwnerKind::anonymous: return "anonymous";
    case OwnerKind::exited_thread: return "exited_thread";
  }
  return "?";
}

Retention::Retention(const Image& image, const SymbolIndex& symbols, const HeapModel& heap, const RootSet& roots,
                     const ReferenceGraph& graph, const std::vector<std::vector<Frame>>* frames)
    : block_count_(static_cast<std::uint32_t>(graph.block_count())) {
  // The runtime's slots dropped; borrowed pointers are left to the tree, which owns what globals hold.
  std::optional<RetentionEdges> edges;
  RootNodeEdges root_edges;
  {
    PhaseTimer timer("dominators: root nodes");
    edges.emplace(graph, roots, BorrowedEdges::left_to_the_tree);
    root_edges = RootNodeBuilder(image, symbols, graph, *edges, frames).build(roots);
    root_nodes_ = std::move(root_edges.nodes);
    for (std::size_t i = 0; i < root_nodes_.size(); ++i)
      if (root_nodes_[i].level == Level::kind)
        owner_kind_nodes_[static_cast<std::size_t>(root_nodes_[i].owner_kind)] = root_node_id(i);
  }
  {
    PhaseTimer timer("dominators: semi-NCA");
    const RetentionGraph g(graph, *edges, root_nodes_, root_edges.offsets, root_edges.targets);
    Dominators d = compute_dominators(g, g.super_root(), g.first_reach());
    idom_ = U32Array(std::move(d.idom));
    // The order is needed once, to sum sizes: not kept (4 bytes a block).
    sum_retained_sizes(heap, d, std::move(d.spare));
  }
}

// Sizes flow up the dominator tree: the lone leaves, which dominate nothing, add themselves to their
// dominators first; then each other node comes after its dominator in the preorder, so backwards.
void Retention::sum_retained_sizes(const HeapModel& heap, const Dominators& tree,
                                   std::vector<std::vector<std::uint32_t>> spare) {
  // A spare array big enough for every node, if one is left: its pages are in memory already.
  auto reuse = [&spare](std::size_t n) {
    for (auto it = spare.begin(); it != spare.end(); ++it)
      if (it->capacity() >= n) {
        std::vector<std::uint32_t> taken = std::move(*it);
        spare.erase(it);
        return taken;
      }
    return std::vector<std::uint32_t>();
  };
  const std::size_t n = idom_.size();
  std::vector<std::uint32_t> low = reuse(n), blocks = reuse(n);
  spare = {};  // the rest: gone before anything new is allocated
  low.assign(n, 0);
  blocks.assign(n, 0);
  // Each block's own size and count, in one pass by slices on all cores: the sizes go straight into the
  // counts' low 32 bits. Whether the counts need high bytes is known once the sizes are summed (no node
  // retains more than their sum); then only the blocks of 4 GiB or more are set again.
  const unsigned workers = worker_count(block_count_, kBlocksPerWorker);
  struct InUse {
    std::uint64_t bytes = 0, blocks = 0;
    std::vector<std::uint32_t> huge;  // the blocks whose size needs high bytes
  };
  std::vector<InUse> in_use(workers);
  run_workers(workers, [&](unsigned w) {
    const auto [first, last] = slice_of(block_count_, workers, w);
    for (std::size_t b = first; b < last; ++b) {
      const Block& blk = heap.blocks[b];
      if (!is_allocated(blk.state)) continue;
      const std::uint64_t size = blk.usable_size();
      in_use[w].bytes += size;
      ++in_use[w].blocks;
      low[b] = static_cast<std::uint32_t>(size);
      if (size >= ByteCounts::kNarrowLimit) in_use[w].huge.push_back(static_cast<std::uint32_t>(b));
      blocks[b] = 1;
    }
  });
  for (const InUse& slice : in_use) {
    in_use_bytes_ += slice.bytes;
    in_use_blocks_ += slice.blocks;
  }
  const ByteCounts::Writer bytes = retained_bytes_.adopt(std::move(low), in_use_bytes_);
  for (const InUse& slice : in_use)
    for (const std::uint32_t b : slice.huge) bytes.set(b, heap.blocks[b].usable_size());
  auto add_to_dominator = [&](std::uint32_t v) {
    const std::uint32_t up = idom_[v];
    bytes.add(up, bytes[v]);
    blocks[up] += blocks[v];
  };
  tree.lone_leaves.for_each_set([&](std::size_t v) { add_to_dominator(static_cast<std::uint32_t>(v)); });
  for (std::size_t i = tree.preorder.size(); i-- > 1;) add_to_dominator(tree.preorder[i]);
  retained_blocks_ = U32Array(std::move(blocks));
}

Retention::Retention(std::uint32_t block_count, const Saved& saved)
    : block_count_(block_count), root_nodes_(saved.root_nodes) {
  const std::size_t n = std::size_t{block_count} + root_nodes_.size() + 1;
  if (saved.idom.size() != n || saved.bytes_low.size() != n || (!saved.bytes_high.empty() && saved.bytes_high.size() != n) ||
      saved.blocks.size() != n)
    throw std::invalid_argument("its arrays do not fit the heap");
  const auto dominators_are_nodes = [&](std::size_t first, std::size_t last) {
    return all_below_or(saved.idom.subspan(first, last - first), n, kNoNode);
  };
  if (saved.checks == ItemChecks::every_item && !holds_in_all_slices(n, kBlocksPerWorker, dominators_are_nodes))
    throw std::invalid_argument("a dominator is no node");
  for (std::size_t i = 0; i < root_nodes_.size(); ++i) {
    const RootNode& node = root_nodes_[i];
    if (node.parent != RootNode::kNoParent && node.parent >= root_nodes_.size())
      throw std::invalid_argument("a root node's parent is no node");
    if (node.level == Level::kind)
      owner_kind_nodes_[static_cast<std::size_t>(node.owner_kind)] = root_node_id(i);
  }
  idom_ = U32Array::viewing(saved.idom, saved.keep);
  retained_bytes_ = ByteCounts::viewing(saved.bytes_low, saved.bytes_high, saved.keep);
  retained_blocks_ = U32Array::viewing(saved.blocks, saved.keep);
  in_use_bytes_ = saved.in_use_bytes;
  in_use_blocks_ = saved.in_use_blocks;
}

Retention::Saved Retention::saved() const {
  return {root_nodes_, idom_.span(), retained_bytes_.low(), retained_blocks_.span(), retained_bytes_.high(),
          in_use_bytes_, in_use_blocks_, {}};
}

std::size_t Retention::memory_bytes() const {
  return idom_.owned_bytes() + retained_bytes_.memory_bytes() + retained_blocks_.owned_bytes();
}

}  // namespace heapscope
