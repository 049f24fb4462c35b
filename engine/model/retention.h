// Retention: what keeps each byte of the heap alive. A dominator tree over the reference graph, entered
// from a virtual super-root through an ownership tree of the roots, so that a retained size answers "who
// holds this":
//
//     super-root → owner kind → owner → parts → blocks
//
//   - threads:      thread T → its registers, its stack (→ frame → local variable), its static TLS (→ the
//                   thread_local objects and key data its destructors will receive), its dynamic TLS
//                   (→ one node per module id);
//   - globals:      module → global variable (words no symbol covers stay with the module), and writable
//                   file mappings no module holds;
//   - finalizers:   one owner per process-wide registration (exit handlers, key data of exited threads);
//   - anonymous:    one owner per mapping;
//   - exited_thread: one owner per descriptor glibc keeps.
//
// A block's retained size is its usable bytes plus those of every block it dominates (what freeing it,
// or dropping the last pointer to it, would free). A node of the tree retains what it alone keeps alive:
// a buffer a thread's register and one of its stack slots point to is retained by the thread, one two
// variables of one frame hold by the frame, one two threads hold by the owner kind "thread", and one a
// thread and a mapping hold by no owner, only by the super-root ("roots of several kinds"). Leaked blocks
// are not in the tree, and neither is anything free.
//
// A register that holds what its own thread's stack holds is a working copy of that stack slot, and so is
// a stack word outside every variable (a saved register, a spill) holding what one of the thread's local
// variables holds: the variable (or slot) is charged, not the copy. A copy alone still holds what it
// points to.
//
// The runtime's own bookkeeping does not own what a registration holds: a word of a heap block that is a
// finalizer registration's slot (an exit_function_list entry, a second-level pthread key array) is the
// registration's root, not an edge of that block, so each registration retains what it alone keeps alive.
//
// A global owns what it holds: a thread's, a registration's or a mapping's pointer into what a global
// holds is borrowed, and so is one from a block no global holds (retention_edges.h). So a dict that
// CPython's sys.modules holds, and that the running frame points to too, is the global's.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/viewed_array.h"
#include "model/dominators.h"
#include "model/reference_graph.h"
#include "model/retention_edges.h"
#include "model/roots.h"
#include "model/u32_array.h"
#include "heap/heap_model.h"
#include "frames/unwind.h"
#include "image/image.h"
#include "symbols/symbol_index.h"

namespace heapscope {

// The owners the per-kind table of `roots` shows.
enum class OwnerKind : std::uint8_t { thread, global, finalizer, anonymous, exited_thread };
inline constexpr std::size_t kOwnerKinds = 5;
const char* owner_kind_name(OwnerKind k);  // "thread", "global", "finalizer", "anonymous", "exited_thread"

struct RootNode {
  static constexpr std::uint32_t kNoThread = 0xffffffffu;
  static constexpr std::uint32_t kNoParent = 0xffffffffu;

  // kind: one node per owner kind, under the super-root; owner: a thread, a module, a mapping, a
  // process-wide registration; part: anything below an owner (a thread's stack, a frame, a variable).
  enum class Level : std::uint8_t { kind, owner, part };
  Level level = Level::part;
  OwnerKind owner_kind = OwnerKind::global;
  std::uint32_t parent = kNoParent;  // index into Retention::root_nodes(); kNoParent: under the super-root
  RootKind kind = RootKind::global;  // parts and owners other than threads: the kind of root memory they hold
  std::string label;   // "global g_tree in app", "stack of thread 1 (tid 42)", "globals of libc.so.6 outside any symbol"
  std::string symbol;  // global variable: its (demangled) name; empty otherwise
  std::string module;  // global: the module's file name; empty otherwise
  std::uint32_t thread = kNoThread;  // thread owners and their parts: index into Image::threads()
  Address address = 0;  // global variable: its address; anonymous: the mapping's start; finalizer: its slot; 0 otherwise
  static constexpr std::uint32_t kNoFrame = 0xffffffffu;
  // stack: the frame (index from the innermost) when the unwind covers it; interpreter_frame: the frame
  // (index into HeapModel::interpreter_frames)
  std::uint32_t frame = kNoFrame;
  std::string variable;  // stack: the local variable holding the pointers, when DWARF names it; interpreter_frame: its local
  static constexpr std::uint32_t kNoFinalizer = 0xffffffffu;
  std::uint32_t finalizer = kNoFinalizer;  // finalizer: the registration (index into RootSet::finalizers)
};

// Byte counts below 1 TiB in 5 bytes each (the low 32 bits and the high 8 in two arrays): a retained size
// per node of heaps of hundreds of millions of blocks, 3 bytes a node less than 64-bit counts. The high
// bytes are there only when a count may need them: no node retains more than the heap holds, so a heap
// under 4 GiB, the usual one, has 4 bytes a node.
class ByteCounts {
 public:
  static constexpr std::uint64_t kLimit = std::uint64_t{1} << 40;
  static constexpr std::uint64_t kNarrowLimit = std::uint64_t{1} << 32;

  // The counts of an assigned ByteCounts, read, set and added to in place: the sums that fill them run
  // over every node, with no check per access of whose memory it is.
  class Writer {
   public:
    std::uint64_t operator[](std::size_t i) const { return high_ ? joined(low_[i], high_[i]) : low_[i]; }
    // Throws std::length_error at 1 TiB or more (no heap this tool reads holds that much), and at 4 GiB
    // without high bytes.
    void set(std::size_t i, std::uint64_t bytes) const {
      if (bytes >= (high_ ? kLimit : kNarrowLimit)) throw std::length_error("a retained size past its counts' width");
      low_[i] = static_cast<std::uint32_t>(bytes);
      if (high_) high_[i] = static_cast<std::uint8_t>(bytes >> 32);
    }
    void add(std::size_t i, std::uint64_t bytes) const { set(i, (*this)[i] + bytes); }

   private:
    friend class ByteCounts;
    Writer(std::uint32_t* low, std::uint8_t* high) : low_(low), high_(high) {}
    std::uint32_t* low_;
    std::uint8_t* high_;  // null: none
  };

  // The counts whose low 32 bits `low` holds (its memory taken over: an array of the node count's size,
  // see Dominators::spare), their high bytes 0, each below `most` (the largest a count will be): a caller
  // fills them in a pass of its own.
  Writer adopt(std::vector<std::uint32_t> low, std::uint64_t most) {
    const std::size_t n = low.size();
    low_ = ViewedArray<std::uint32_t>(std::move(low));
    high_ = most < kNarrowLimit ? ViewedArray<std::uint8_t>() : ViewedArray<std::uint8_t>(std::vector<std::uint8_t>(n, 0));
    return Writer(low_.writable(), high_.empty() ? nullptr : high_.writable());
  }
  std::uint64_t operator[](std::size_t i) const { return high_.empty() ? low_[i] : joined(low_[i], high_[i]); }
  std::size_t memory_bytes() const { return low_.owned_bytes() + high_.owned_bytes(); }
  std::span<const std::uint32_t> low() const { return low_.span(); }
  std::span<const std::uint8_t> high() const { return high_.span(); }  // empty: all 0
  // Over arrays `keep` holds (an index file's mapping); `high` empty or as long as `low`.
  static ByteCounts viewing(std::span<const std::uint32_t> low, std::span<const std::uint8_t> high,
                            const std::shared_ptr<const void>& keep) {
    ByteCounts c;
    c.low_ = ViewedArray<std::uint32_t>::viewing(low, keep);
    c.high_ = ViewedArray<std::uint8_t>::viewing(high, keep);
    return c;
  }

 private:
  static std::uint64_t joined(std::uint32_t low, std::uint8_t high) { return std::uint64_t{high} << 32 | low; }
  ViewedArray<std::uint32_t> low_;
  ViewedArray<std::uint8_t> high_;
};

class Retention {
 public:
  // `frames` (per thread, from the unwind; may be null) split each thread's stack into one root per frame
  // and local variable.
  Retention(const Image& image, const SymbolIndex& symbols, const HeapModel& heap, const RootSet& roots,
            const ReferenceGraph& graph, const std::vector<std::vector<Frame>>* frames = nullptr);

  // What the index cache keeps of a Retention (session/index_cache.h): its root nodes, and per node its
  // immediate dominator and retained bytes (low 32 bits, high 8) and blocks.
  struct Saved {
    std::vector<RootNode> root_nodes;
    std::span<const std::uint32_t> idom, bytes_low, blocks;
    std::span<const std::uint8_t> bytes_high;
    std::uint64_t in_use_bytes = 0, in_use_blocks = 0;
    std::shared_ptr<const void> keep;  // the memory the arrays are in, held by the arrays viewing it
    ItemChecks checks = ItemChecks::every_item;  // of the dominators: every one, or the arrays' sizes alone
  };
  // A Retention again from what was saved of one over `block_count` blocks, viewing its arrays. Throws
  // std::invalid_argument when the arrays do not fit the blocks and the nodes, or a dominator or parent is
  // no node (a damaged file must not make a later read go astray). Whether it is this image's is the
  // caller's check.
  Retention(std::uint32_t block_count, const Saved& saved);
  Saved saved() const;  // views of this one's arrays

  // Node ids: blocks first (a block's node id is its BlockId), then the ownership tree's nodes (owner
  // kinds, owners and parts), then the super-root.
  std::uint32_t block_count() const { return block_count_; }
  std::uint32_t node_count() const { return static_cast<std::uint32_t>(idom_.size()); }
  std::uint32_t root_node_id(std::size_t root) const { return block_count_ + static_cast<std::uint32_t>(root); }
  std::uint32_t super_root() const { return node_count() - 1; }
  // The node of an owner kind; kNoNode when the image has no root of that kind.
  std::uint32_t owner_kind_node(OwnerKind kind) const { return owner_kind_nodes_[static_cast<std::size_t>(kind)]; }

  bool is_block(std::uint32_t node) const { return node < block_count_; }
  bool is_root(std::uint32_t node) const { return node >= block_count_ && node < super_root(); }
  // A block, an owner or a part: something a person can be told holds memory (not a kind, not the super-root).
  bool is_holder(std::uint32_t node) const {
    return is_block(node) || (is_root(node) && root(node).level != RootNode::Level::kind);
  }
  const RootNode& root(std::uint32_t node) const { return root_nodes_[node - block_count_]; }
  const std::vector<RootNode>& root_nodes() const { return root_nodes_; }

  // The node's immediate dominator; kNoNode for the super-root and for nodes no root reaches.
  std::uint32_t dominator(std::uint32_t node) const { return idom_[node]; }
  bool reachable(std::uint32_t node) const { return node == super_root() || idom_[node] != kNoNode; }
  // Usable bytes and number of the blocks the node dominates, itself included (an unreachable block
  // dominates nothing but itself).
  std::uint64_t retained_bytes(std::uint32_t node) const { return retained_bytes_[node]; }
  std::uint32_t retained_blocks(std::uint32_t node) const { return retained_blocks_[node]; }

  // Σ usable bytes and number of allocated blocks, reachable or leaked: what percentages are of.
  std::uint64_t in_use_bytes() const { return in_use_bytes_; }
  std::uint64_t in_use_blocks() const { return in_use_blocks_; }

  std::size_t memory_bytes() const;

 private:
  // `spare`: arrays whose memory to reuse (Dominators::spare).
  void sum_retained_sizes(const HeapModel& heap, const Dominators& tree, std::vector<std::vector<std::uint32_t>> spare);

  std::uint32_t block_count_ = 0;
  std::vector<RootNode> root_nodes_;
  std::uint32_t owner_kind_nodes_[kOwnerKinds] = {kNoNode, kNoNode, kNoNode, kNoNode, kNoNode};
  U32Array idom_;
  ByteCounts retained_bytes_;
  U32Array retained_blocks_;
  std::uint64_t in_use_bytes_ = 0, in_use_blocks_ = 0;
};

}  // namespace heapscope
