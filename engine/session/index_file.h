// IndexFile: the binary form of a saved index (session/index_cache.h): the heap's blocks, the pointer
// graph's arrays and the leak verdicts of one core, in one file that loads by mapping it (nothing is
// copied or parsed per element).
//
// Layout: a header (magic, format version, file size, a checksum of everything after the header), a
// table of sections (kind, offset, size), then the sections, each 64-byte aligned and the blocks 4 KiB
// aligned so that their pages become the HeapModel's block array in place. All numbers little-endian, as
// the machine that wrote them (the key names the machine's format through the format version).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "heap/block.h"

namespace heapscope {

enum class IndexSection : std::uint32_t {
  key = 1,               // the text the index was made under (IndexCache's key): compared in full
  heap_meta,             // the HeapModel but its blocks, as JSON (session/heap_model_json.h)
  blocks,                // Block[]
  // Block edges (forward and reverse): their offsets as the graph keeps them (model/compact_offsets.h),
  // in three arrays each, viewed in place.
  forward_lines,         // u32[lines]: each line's first offset
  forward_edges,         // u32[]
  root_offsets,          // u32[roots + 1]
  root_edges,            // u32[]
  reverse_lines,         // u32[lines], or absent
  reverse_edges,         // u32[]
  root_referrer_blocks,  // u32[root edges], sorted: the blocks roots point into
  root_referrers,        // u32[root edges]: the root range of each
  verdicts,              // u8[blocks] (Verdict), or absent
  possibly,              // u8[blocks]
  held_by,               // u8[blocks] (HeldBy), or empty when no block is held by an interior-pointer idiom
  // The dominator tree (model/retention.h), when it was computed: absent otherwise. Nodes: the blocks, the
  // root nodes, the super-root.
  retention_meta,        // its root nodes and totals, as JSON (session/retention_json.h)
  retention_idom,        // u32[nodes]
  retention_bytes_low,   // u32[nodes]
  retention_blocks,      // u32[nodes]
  retention_bytes_high,  // u8[nodes], or empty when every count is below 4 GiB
  // The names of the whole heap (Session::names()), when they were computed: absent otherwise.
  names_meta,            // the type table, as JSON (session/block_names_json.h)
  names_ids,             // u16[blocks] or u32[blocks]: each block's type id
  // A runtime's object headers (runtime/object_headers.h), when the image runs one: absent otherwise.
  objects_meta,          // what was recognised, the count, the type names, as JSON (session/object_headers_json.h)
  objects_starts,        // u8[blocks]
  objects_types,         // u32[blocks]
  forward_ends,          // u8[lines * 64]
  forward_wide,          // u32[wide lines * 65]
  reverse_ends,          // u8[lines * 64], or absent
  reverse_wide,          // u32[wide lines * 65]
  block_pages,           // u32[]: the block index's page table (model/block_index.h), or absent
  leaked,                // u32[]: the leaked blocks, in order (LeakVerdicts::leaked), or absent
  objects_ends,          // u16[blocks]: where each block's object ends, in words (ObjectHeaders::object_end_words), or absent
  objects_strided,       // ObjectHeaders::StridedBlock[], or absent
};

// One section to write: its bytes as a sequence of pieces (the graph's edges are one piece per scan
// worker).
struct IndexSectionData {
  IndexSection kind = IndexSection::key;
  std::vector<std::span<const std::byte>> pieces;
};

// Writes `sections` to `path` through a temporary file in the same directory renamed over it at the
// end, so that a reader sees the whole file or none. Reports the bytes written to the current Progress
// (an interrupt stops it). On any failure, including an interrupt, removes the temporary file and
// throws (std::runtime_error with the reason, or Interrupted).
void write_index_file(const std::string& path, const std::vector<IndexSectionData>& sections);

// The checked mark beside an index file: written by its writer, and by a reader that computed the
// checksum, it records that the file as it is now (device, inode, size, modification and change times:
// any write changes the change time, which cannot be set back) holds the bytes its checksum was computed
// over, in this boot (the page cache every reader sees until a restart). A reader that finds a mark
// matching the file and its header's checksum does not hash the file again: a command about one block
// then reads only the pages it needs. After a restart, a copy, any change, or with no mark, the checksum
// is computed over every byte as before. The mark says who left it: a file its writer's mark vouches for
// holds what heapscope's writer wrote (IndexFile::as_written).
std::string checked_mark_path(const std::string& index_path);

// A loaded index: the file mapped privately; sections are views into it.
class IndexFile {
 public:
  // Null with *error set ("not found" when there is no file) unless the file is whole: magic, format
  // version, its recorded size equal to the file's, every section inside it, and the checksum over its
  // body (or a checked mark that says it was computed: checked_mark_path).
  static std::unique_ptr<IndexFile> open(const std::string& path, std::string* error);
  ~IndexFile();
  IndexFile(const IndexFile&) = delete;
  IndexFile& operator=(const IndexFile&) = delete;

  // Whether the file is as heapscope's writer left it in this boot (its writer's checked mark holds): its
  // arrays were made by heapscope, whole by construction, and need their sizes checked, not every item
  // (ItemChecks). A file whose checksum a reader computed may hold anything the checksum was made to fit.
  bool as_written() const { return as_written_; }

  // The section's bytes; empty when the file has none.
  std::span<const std::byte> section(IndexSection kind) const;
  bool has(IndexSection kind) const;
  // Its bytes as u32 (sections of u32 have sizes that are multiples of 4: checked at open).
  std::span<const std::uint32_t> words(IndexSection kind) const;
  // The blocks section's pages, handed over once to a BlockArray (BlockArray::adopt_mapping), which
  // unmaps them; the file's other pages stay mapped for the IndexFile's lifetime (the arrays viewing them
  // hold it, as a shared_ptr).
  std::pair<Block*, std::size_t> take_blocks();

 private:
  struct Entry {
    IndexSection kind;
    std::uint64_t offset = 0, size = 0;
  };
  IndexFile() = default;
  const Entry* find(IndexSection kind) const;

  std::byte* map_ = nullptr;
  std::size_t size_ = 0;
  std::vector<Entry> entries_;
  bool blocks_taken_ = false;
  bool as_written_ = false;
};

// The checksum the file carries: a hash of its body fast enough to check a whole index at load, which every
// command with an index does (docs/performance.md, "Index cache"). Incremental, for the writer.
class IndexChecksum {
 public:
  void update(std::span<const std::byte> bytes);
  std::uint64_t finish() const;
  // What update(bytes) then finish() give, on all cores (a worker per `bytes_per_worker` at least): each
  // stripe adds to the lanes alone, at keys its position gives, so that parts of the bytes are hashed
  // apart and their lanes summed.
  static std::uint64_t of(std::span<const std::byte> bytes, std::size_t bytes_per_worker = std::size_t{64} << 20);

 private:
  static constexpr std::size_t kStripe = 64;
  void mix(const std::byte* data, std::size_t stripes);
  std::uint64_t lanes_[8] = {};
  std::uint64_t stripes_ = 0;  // mixed so far: where the next stripe is, which its keys depend on
  std::byte pending_[kStripe] = {};
  std::size_t pending_size_ = 0;
  std::uint64_t total_ = 0;
};

}  // namespace heapscope
