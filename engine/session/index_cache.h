// IndexCache: a second command on the same core, in a new process, starts from what the first computed
// — the heap's blocks, the pointer graph (forward and reverse edges) and the leak verdicts — saved in one
// file per core under the user's cache directory (as Eclipse MAT keeps index files beside a dump).
//
// A saved index is used only when all of these hold, and is otherwise ignored, computed again and
// rewritten: the file is whole (magic, format version, size, section table, checksum: IndexFile::open);
// it was made under the same key (the core's size, mtime, inode and device, the image's modules and
// build-ids, heapscope's version and own build-id, the index format, and the session options that change
// the products: allocator plug-ins and symbol search); and its content agrees with the core: a sample of
// blocks' chunk headers (glibc) and out-edges, and every root range's edges, rescanned with the graph's
// own scan (check_heap, check_graph). Every item of its arrays is checked to lead nowhere past its table,
// unless the file is as heapscope's writer left it (CachedProducts::checks).
//
// Only the CLI on core files uses it (a debugger's session already keeps products across commands on one
// stop; a live process changes). Docs: docs/usage.md, "Index cache".
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "heap/heap_model.h"
#include "image/image.h"
#include "model/leak_verdicts.h"
#include "model/reference_graph.h"
#include "model/retention.h"
#include "runtime/allocator.h"
#include "runtime/object_headers.h"
#include "symbols/module_symbols.h"
#include "types/block_types.h"
#include "types/dwarf_typing.h"

namespace heapscope {


// What a saved index holds, loaded and found whole and of the same key, but not yet checked against the
// image. The graph's arrays view the file's mapping (graph.keep).
struct CachedProducts {
  // Every item of the saved arrays checked, or, in a file as heapscope's writer left it, their sizes alone
  // (IndexFile::as_written): for every saved part's checks (graph, verdicts, dominator tree, page table,
  // names, object headers).
  ItemChecks checks = ItemChecks::every_item;
  std::unique_ptr<HeapModel> heap;
  U32Array block_pages;  // the block index's page table; empty when not saved
  ReferenceGraph::SavedArrays graph;
  LeakVerdicts verdicts;
  std::optional<Retention::Saved> retention;  // its arrays view the file's mapping too; absent when not saved
  struct SavedNames {
    std::string meta;                 // session/block_names_json
    std::span<const std::byte> ids;   // views the file's mapping
    std::shared_ptr<const void> keep;  // the mapping
  };
  std::optional<SavedNames> names;    // absent when not saved
  std::optional<ObjectHeaders> object_headers;  // absent when not saved (the image runs no runtime heapscope knows)
};

class IndexCache {
 public:
  // Keeps at most this many indexes, and this many bytes of them: the oldest go first.
  static constexpr std::size_t kMaxFiles = 8;
  static constexpr std::uint64_t kMaxBytes = std::uint64_t{8} << 30;

  // The cache of the core file at `core_path` in directory `dir`. The core's identity is read now.
  IndexCache(std::string core_path, std::string dir);

  // The key of this core's products under these inputs; empty when the core cannot be identified (then
  // nothing is loaded or saved).
  std::string key(const Image& image, const SymbolSearchOptions& symbols,
                  const std::vector<const AllocatorPlugin*>& allocators, IdiomSet idioms = kAllIdioms) const;
  // The file the index of `key` lives in.
  std::string path_for(const std::string& key) const;

  // Null when there is no usable index for `key`; *note says why when a file was there but failed a check
  // (empty when there simply was none).
  std::unique_ptr<CachedProducts> load(const std::string& key, std::string* note) const;
  // The one-line warning for an index of `key` that was there but failed a check (`why`).
  std::string rejection(const std::string& key, const std::string& why) const;
  // Writes the index of `key` (atomically), then trims the directory to its bounds. Throws
  // std::runtime_error (or Interrupted) when it cannot; no partial file is left.
  // `retention`, the dominator tree, is saved when given, and so are the whole heap's names (`types`
  // with their DWARF types, `dwarf`) and a runtime's object headers.
  void save(const std::string& key, const HeapModel& heap, const ReferenceGraph& graph,
            const LeakVerdicts& verdicts, const Retention* retention = nullptr, const BlockTypes* types = nullptr,
            const DwarfTypes* dwarf = nullptr, const ObjectHeaders* headers = nullptr) const;

 private:
  void evict(const std::string& keep) const;

  std::string core_path_;
  std::string dir_;
  std::string core_identity_;  // "size=… mtime_ns=… inode=… device=…", empty when stat failed
};

// How many blocks the checks below look at. They tell an index of another core apart (a core written again
// under the same name, size and times), whose blocks differ nearly everywhere; that the file holds what was
// written is the checksum's part (index_file.h). Each sampled block costs a page fault on the core (the
// checks were a sixth of a command about one block with a thousand).
inline constexpr std::size_t kSampledBlocks = 256;

// The blocks the checks below look at, of a heap of `count` blocks: one of each of kSampledBlocks equal
// stretches of the ids, in ascending order, at a hashed offset in its stretch (so that no repeating pattern
// of the heap's blocks hides from it), block 0 and the last block included.
std::vector<std::size_t> sample_blocks(std::size_t count);

// The checks against the image (false and *why on the first disagreement). check_heap: the chunk header
// of a sample of glibc blocks gives the block's size. check_graph (on a graph made from saved arrays over
// the session's index and roots): a sample of blocks (none over 4 KiB) and every root range rescanned
// give the saved edges; the reverse edges and the verdicts agree with them.
bool check_heap(const Image& image, const HeapModel& heap, std::string* why);
bool check_graph(const ReferenceGraph& graph, const LeakVerdicts& verdicts, std::string* why);
// check_retention (on a Retention made from saved arrays, over a checked graph and its verdicts): a sample of
// blocks is in the tree exactly when allocated and not leaked, under a dominator that retains at least as much.
bool check_retention(const Retention& retention, const LeakVerdicts& verdicts, std::string* why);
// check_object_headers (runtime/object_headers.h) over the same sample of blocks.
bool check_saved_object_headers(const Image& image, const SymbolIndex& symbols, const HeapModel& heap,
                                const ObjectHeaders& saved, std::string* why);

}  // namespace heapscope
