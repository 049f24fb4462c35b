// Retention: what keeps each byte of the heap alive. A dominator tree over the reference graph, entered
// from a virtual super-root:
//
//     super-root → one node per root kind → one node per root → blocks
//
// A block's retained size is its usable bytes plus those of every block it dominates (what freeing it,
// or dropping the last pointer to it, would free); a root's is what it alone keeps alive; a kind's is what
// the roots of that kind keep alive between them (a block two globals point to is retained by neither
// global but by the kind "global"; one held by a stack and by a register belongs to no kind, only to the
// super-root). Leaked blocks are not in the tree, and neither is anything free.
//
// Roots are grouped into nodes as a person would name them:
//   - registers: one node per thread; its stack: one node per frame and local variable when the unwind
//     and DWARF say where they are, the rest of the stack one node per thread (registers and stack are
//     kept apart so that the kinds stay apart: the per-kind table shows what registers alone hold);
//   - globals: one node per variable, splitting each module's writable ranges by the symbol covering each
//     pointer word; words no symbol covers make one node per module, as do modules without symbols;
//   - static TLS: one node per thread; dynamic TLS: one per thread and module id;
//   - anonymous memory: one node per mapping;
//   - finalizers: one node per registration (exit handler, thread_local destructor, pthread key data).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "model/dominators.h"
#include "model/reference_graph.h"
#include "model/roots.h"
#include "heap/heap_model.h"
#include "frames/unwind.h"
#include "image/image.h"
#include "symbols/symbol_index.h"

namespace heapscope {

struct RootNode {
  static constexpr std::uint32_t kNoThread = 0xffffffffu;

  RootKind kind = RootKind::global;
  std::string label;   // "global g_tree in app", "stack of thread 1 (tid 42)", "globals of libc.so.6 outside any symbol"
  std::string symbol;  // global variable: its (demangled) name; empty otherwise
  std::string module;  // global: the module's file name; empty otherwise
  std::uint32_t thread = kNoThread;  // registers, stack, tls, dynamic_tls, finalizer: index into Image::threads()
  Address address = 0;  // global variable: its address; anonymous: the mapping's start; finalizer: its slot; 0 otherwise
  static constexpr std::uint32_t kNoFrame = 0xffffffffu;
  std::uint32_t frame = kNoFrame;  // stack: the frame (index from the innermost) when the unwind covers it
  std::string variable;            // stack: the local variable holding the pointers, when DWARF names it
  static constexpr std::uint32_t kNoFinalizer = 0xffffffffu;
  std::uint32_t finalizer = kNoFinalizer;  // finalizer: the registration (index into RootSet::finalizers)
};

class Retention {
 public:
  // `frames` (per thread, from the unwind; may be null) split each thread's stack into one root per frame
  // and local variable.
  Retention(const Image& image, const SymbolIndex& symbols, const HeapModel& heap, const RootSet& roots,
            const ReferenceGraph& graph, const std::vector<std::vector<Frame>>* frames = nullptr);

  // Node ids: blocks first (a block's node id is its BlockId), then root nodes, then one node per root
  // kind, then the super-root.
  std::uint32_t block_count() const { return block_count_; }
  std::uint32_t node_count() const { return static_cast<std::uint32_t>(idom_.size()); }
  std::uint32_t root_node_id(std::size_t root) const { return block_count_ + static_cast<std::uint32_t>(root); }
  std::uint32_t kind_node_id(RootKind kind) const { return kinds_begin() + static_cast<std::uint32_t>(kind); }
  std::uint32_t super_root() const { return node_count() - 1; }

  bool is_block(std::uint32_t node) const { return node < block_count_; }
  bool is_root(std::uint32_t node) const { return node >= block_count_ && node < kinds_begin(); }
  bool is_kind(std::uint32_t node) const { return node >= kinds_begin() && node < super_root(); }
  const RootNode& root(std::uint32_t node) const { return root_nodes_[node - block_count_]; }
  RootKind kind(std::uint32_t kind_node) const { return static_cast<RootKind>(kind_node - kinds_begin()); }
  std::size_t kind_count() const { return super_root() - kinds_begin(); }
  const std::vector<RootNode>& root_nodes() const { return root_nodes_; }

  // The node's immediate dominator; kNoNode for the super-root and for nodes no root reaches.
  std::uint32_t dominator(std::uint32_t node) const { return idom_[node]; }
  bool reachable(std::uint32_t node) const { return node == super_root() || idom_[node] != kNoNode; }
  // Usable bytes and number of the blocks the node dominates, itself included (an unreachable block
  // dominates nothing but itself).
  std::uint64_t retained_bytes(std::uint32_t node) const { return retained_bytes_[node]; }
  std::uint32_t retained_blocks(std::uint32_t node) const { return retained_blocks_[node]; }

  // The reachable nodes, super-root first; every node comes after its dominator.
  std::span<const std::uint32_t> preorder() const { return preorder_; }

  // Σ usable bytes and number of allocated blocks, reachable or leaked: what percentages are of.
  std::uint64_t in_use_bytes() const { return in_use_bytes_; }
  std::uint64_t in_use_blocks() const { return in_use_blocks_; }

  std::size_t memory_bytes() const;

 private:
  std::uint32_t kinds_begin() const { return block_count_ + static_cast<std::uint32_t>(root_nodes_.size()); }
  void sum_retained_sizes(const HeapModel& heap);

  std::uint32_t block_count_ = 0;
  std::vector<RootNode> root_nodes_;
  std::vector<std::uint32_t> idom_;
  std::vector<std::uint32_t> preorder_;
  std::vector<std::uint64_t> retained_bytes_;
  std::vector<std::uint32_t> retained_blocks_;
  std::uint64_t in_use_bytes_ = 0, in_use_blocks_ = 0;
};

}  // namespace heapscope
