// Heap snapshots as data: what the heap held at one moment, kept as plain data so that it outlives the Session
// it came from (a debugger makes a new Session at every stop) and can be compared with a later state.
//
// A snapshot holds totals per type and per root, and one 16-byte record per allocated block (address,
// chunk size, type), sorted by address, for comparing addresses within one process.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "heap/block.h"
#include "image/image.h"

namespace heapscope {


struct SnapshotTypeTotal {
  std::string type;  // as TypeGroups names it: a DWARF or vtable type, or "unknown (N bytes)"
  std::uint64_t count = 0, bytes = 0;  // allocated blocks and their usable bytes
};

struct SnapshotRootTotal {
  std::string root;  // a label that names the same root in another core of the program (see stable_root_label)
  std::string kind;  // root_kind_name()
  std::uint64_t blocks = 0, bytes = 0;  // what the root alone retains (dominator tree), as `roots` reports it
};

// One allocated block: 16 bytes, so a snapshot of 5 million blocks costs 80 MB.
struct SnapshotBlock {
  static constexpr std::uint32_t kMmappedBit = 0x80000000u;
  static constexpr std::uint32_t kBareBit = 0x40000000u;    // a headerless block (BlockLayout::bare)
  static constexpr std::uint32_t kInbandBit = 0x20000000u;  // a 4-byte in-band header (BlockLayout::inband)
  static constexpr std::uint32_t kFlagBits = kMmappedBit | kBareBit | kInbandBit;

  Address address = 0;          // what malloc returned
  std::uint32_t size_units = 0;  // chunk size / 16 (/ 8 for a headerless block)
  std::uint32_t type_and_flag = 0;  // index into HeapSnapshot::types; kMmappedBit for an mmapped chunk,
                                    // kBareBit for a headerless block, kInbandBit for an in-band header's

  std::uint32_t type() const { return type_and_flag & ~kFlagBits; }
  bool mmapped() const { return (type_and_flag & kMmappedBit) != 0; }
  bool bare() const { return (type_and_flag & kBareBit) != 0; }
  bool inband() const { return (type_and_flag & kInbandBit) != 0; }
  std::uint64_t chunk_size() const { return std::uint64_t{size_units} * (bare() ? 8 : 16); }
  std::uint64_t usable_size() const {
    if (bare()) return chunk_size();
    if (inband()) return chunk_size() - Block::kInbandHeaderSize;
    return chunk_size() - (mmapped() ? 16 : 8);
  }
};
static_assert(sizeof(SnapshotBlock) == 16);

// The record of an allocated block whose type has index `type` in its snapshot.
inline SnapshotBlock snapshot_block(const Block& b, std::uint32_t type) {
  const std::uint32_t flags = (b.state == BlockState::mmapped ? SnapshotBlock::kMmappedBit : 0) |
                              (b.is_bare() ? SnapshotBlock::kBareBit : 0) |
                              (b.is_inband() ? SnapshotBlock::kInbandBit : 0);
  return {b.address(), b.size_units, type | flags};
}

struct HeapSnapshot {
  std::string name;
  std::string target;  // Image::description()
  int pid = 0;         // 0 when unknown
  std::int64_t capture_time_ns = 0;  // Image::capture_time_ns()
  std::uint64_t in_use_blocks = 0, in_use_bytes = 0;  // allocated blocks, usable bytes
  std::vector<SnapshotTypeTotal> types;  // indexed by SnapshotBlock::type()
  // Per allocation site (its program frames, " ← "-joined), when the allocator sampled the blocks: the
  // estimated blocks and bytes (exact when every allocation was sampled); empty without sites.
  std::vector<SnapshotTypeTotal> sites;
  std::vector<SnapshotRootTotal> roots;  // most retained bytes first
  std::vector<SnapshotBlock> blocks;     // by address
  std::vector<std::string> warnings;     // the session's when it was taken: a damaged core's, say
};

// A report over snapshots repeats each one's own warnings, named after it, unless the current session
// has the same: what was wrong with an earlier core is otherwise lost.
void add_snapshot_warnings(const HeapSnapshot& snapshot, const std::vector<std::string>& current,
                           std::vector<std::string>& out);

// Named snapshots in the order they were saved. Shared by every Session of one target (SessionOptions),
// so a debugger keeps them across stops; safe to use from several threads.
class SnapshotStore {
 public:
  using Ptr = std::shared_ptr<const HeapSnapshot>;

  // Saving under a name in use replaces that snapshot; it then counts as the newest.
  void save(HeapSnapshot snapshot);
  Ptr find(const std::string& name) const;  // null when there is none
  bool drop(const std::string& name);       // false when there was none
  std::vector<Ptr> all() const;             // oldest first

 private:
  mutable std::mutex mutex_;
  std::vector<Ptr> snapshots_;
};

// The snapshot stores of every target a frontend has opened, by a key naming the target (a core's path, a
// process's pid and start time, a debugger's process id): a frontend makes a new Session at every stop, and
// the store of its target outlives them all. Safe to use from several threads.
class SnapshotRegistry {
 public:
  std::shared_ptr<SnapshotStore> store_for(const std::string& target_key);

 private:
  std::mutex mutex_;
  std::map<std::string, std::shared_ptr<SnapshotStore>> stores_;
};

}  // namespace heapscope
