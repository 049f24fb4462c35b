// Reports of the retention commands: top (largest retained sizes and suspects) and roots (retention per
// root kind and per root).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "reports/graph_reports.h"

namespace heapscope {

// A node of the roots' ownership tree (model/retention.h): an owner (a thread, a module's globals, a
// mapping, a registration) or a part of one (a thread's registers or stack, a frame, a variable).
struct RootNodeRef {
  std::string kind;    // owners: owner_kind_name(); parts: root_kind_name()
  std::string label;   // "global g_tree in app", "stack of thread 1 (tid 42)"
  std::uint32_t depth = 0;  // 0: an owner; parts one more than what they are part of
  std::string owner;        // parts: the label of their owner; empty for owners
  std::string symbol;  // global variable: its name; empty otherwise
  std::string module;  // global: the module's file name; empty otherwise
  std::uint32_t tid = 0;  // registers, stack, TLS: the thread's tid; 0 otherwise
  Address address = 0;    // global variable: its address; anonymous: the mapping's start; 0 otherwise
};

// What a dominator is: a heap block or a root (exactly one is set).
struct Holder {
  std::optional<BlockRef> block;
  std::optional<RootNodeRef> root;
};

struct Retained {
  std::uint64_t bytes = 0;   // usable bytes of the blocks dominated, the holder's own included
  std::uint64_t blocks = 0;
  double percent = 0;        // of the in-use heap (Σ usable bytes of allocated blocks)
};

struct HeapTotals {
  std::uint64_t in_use_bytes = 0, in_use_blocks = 0;      // allocated blocks, reachable or not
  std::uint64_t reachable_bytes = 0, reachable_blocks = 0;  // in the dominator tree
};

struct TopBlockRow {
  BlockRef block;
  Retained retained;
};

struct TopTypeRow {
  std::string type;  // by site: the site's innermost frames ("f() at x.c:3 ← main() at x.c:9")
  std::uint64_t count = 0, bytes = 0;  // reachable instances and their usable bytes
  Retained retained;  // what the instances dominate: Σ over instances no other instance of the type dominates
  std::optional<AllocatedAt> site;  // by site: the site (none for the blocks without one)
};

struct TopRootRow {
  RootNodeRef root;
  Retained retained;
};

struct Suspect {
  enum class Kind { big_retainer, accumulation };
  Kind kind = Kind::big_retainer;
  Holder holder;            // the dominator
  Retained retained;        // the holder's
  // accumulation: `instances` blocks of `type` (usable bytes `instance_bytes`) whose nearest dominator of
  // another type is the holder.
  std::string type;
  std::uint64_t instances = 0, instance_bytes = 0;
  // Big retainers: the types the holder retains most bytes of, and where the bytes pile up: going down
  // the dominator tree through the largest child, the last node still retaining 80% of the holder's
  // bytes (absent when that is the holder itself).
  std::vector<TopTypeRow> retained_types;
  std::optional<Holder> accumulation_point;
  Retained accumulation_retained;
  // Shortest path from a root to the accumulation point, or else to the holder, when that is a block.
  std::optional<RetainerPath> path;
};

struct TopReport {
  std::string by;  // "block", "type", "site" or "root"
  HeapTotals heap;
  std::vector<TopBlockRow> blocks;  // by block
  std::vector<TopTypeRow> types;    // by type, and by site
  std::vector<TopRootRow> roots;    // by root
  std::vector<Suspect> suspects;
  std::vector<std::string> warnings;
};

// What the parts of one kind (registers, stacks, static TLS, ...) of all owners keep alive, each part alone.
struct RootPartTotal {
  std::string kind;  // root_kind_name()
  std::uint64_t bytes = 0, blocks = 0;
};

struct RootKindRow {
  std::string kind;  // owner_kind_name(): thread, global, finalizer, anonymous, exited_thread
  std::uint64_t roots = 0;  // owners of this kind
  Retained retained;        // what owners of this kind keep alive between them
  // What no one owner of this kind keeps alive alone, but several together (a block two modules' globals
  // point to): `retained` less the owners' own, so that the owner rows and it add up to the kind.
  Retained together;
  std::vector<RootPartTotal> parts;  // threads: Σ over threads of what their registers, stacks, TLS alone keep
};

struct RootsReport {
  HeapTotals heap;
  std::vector<RootKindRow> kinds;  // by retained bytes, largest first
  // Reachable, but only through owners of more than one kind (e.g. a thread's stack and a global).
  Retained shared;
  // Owners by retained bytes, largest first, at most -n of them, each followed by its parts that retain
  // anything (largest first, depth first).
  std::vector<TopRootRow> roots;
  std::uint64_t root_count = 0;    // all owners
  std::vector<std::string> warnings;
};

}  // namespace heapscope
