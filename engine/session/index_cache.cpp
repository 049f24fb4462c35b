#include "session/index_cache.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "base/bounded_scan.h"
#include "base/cache_directory.h"
#include "base/phase_timer.h"
#include "base/progress.h"
#include "elf/elf_file.h"
#include "session/block_names_json.h"
#include "session/heap_model_json.h"
#include "session/object_headers_json.h"
#include "session/index_file.h"
#include "session/retention_json.h"

namespace heapscope {

namespace fs = std::filesystem;

namespace {

constexpr const char* kIndexExtension = ".hsindex";
// A block rescanned for the check is at most this large: a sample point on a larger one takes the next
// block that is not, in its stretch of the heap. One CPython list of 20 M objects is 160 MB, and rescanning
// it alone took a sixth of a one-block command on that heap; on swipl's heap, whose blocks of 1–4 KiB are
// many, the rescans took a fifth (12 ms). A block of a few words tells another core apart as well.
constexpr std::uint64_t kRescannedBytes = 512;

// The running heapscope's own build-id: a rebuilt heapscope may compute its products differently while
// its version string stays the same.
std::string own_build_id() {
  const std::unique_ptr<ElfFile> self = ElfFile::open("/proc/self/exe", nullptr);
  const std::optional<std::string> id = self ? self->build_id() : std::nullopt;
  return id ? *id : "none";
}

std::string key_hash_name(const std::string& key) {
  IndexChecksum hash;
  hash.update(std::as_bytes(std::span(key.data(), key.size())));
  char name[17];
  std::snprintf(name, sizeof name, "%016llx", static_cast<unsigned long long>(hash.finish()));
  return name;
}


// sample_blocks, each moved to the first block from it on, before the next sample point, that is at most
// kRescannedBytes (none there: left out).
std::vector<std::size_t> sample_rescannable_blocks(const BlockArray& blocks) {
  std::vector<std::size_t> sample = sample_blocks(blocks.size());
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < sample.size(); ++i) {
    const std::size_t end = i + 1 < sample.size() ? sample[i + 1] : blocks.size();
    std::size_t b = sample[i];
    while (b < end && blocks[b].chunk_size() > kRescannedBytes) ++b;
    if (b < end) out.push_back(b);
  }
  return out;
}

template <class T>
std::span<const std::byte> bytes_of(std::span<const T> items) {
  return std::as_bytes(items);
}

std::span<const std::byte> text_bytes(const std::string& s) { return std::as_bytes(std::span(s.data(), s.size())); }
// A text section of `file` (its key, its JSON parts), as text_bytes wrote it.
std::string section_text(const IndexFile& file, IndexSection kind) {
  const std::span<const std::byte> bytes = file.section(kind);
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

IndexSectionData pieces(IndexSection kind, std::vector<std::span<const std::byte>> parts) {
  IndexSectionData s;
  s.kind = kind;
  s.pieces = std::move(parts);
  return s;
}

ReferenceGraph::EdgeSlice slice_of(const IndexFile& file, IndexSection offsets, IndexSection edges) {
  const std::span<const std::uint32_t> o = file.words(offsets);
  return {0, static_cast<std::uint32_t>(o.empty() ? 0 : o.size() - 1), o, file.words(edges)};
}

// The sections of one kind of block edges (forward or reverse).
struct BlockEdgeSections {
  IndexSection lines, ends, wide, edges;
};
constexpr BlockEdgeSections kForward{IndexSection::forward_lines, IndexSection::forward_ends,
                                     IndexSection::forward_wide, IndexSection::forward_edges};
constexpr BlockEdgeSections kReverse{IndexSection::reverse_lines, IndexSection::reverse_ends,
                                     IndexSection::reverse_wide, IndexSection::reverse_edges};

// `blocks` blocks' edges as saved (ReferenceGraph checks that they fit); no items when not saved.
ReferenceGraph::BlockEdges block_edges_of(const IndexFile& file, const BlockEdgeSections& s, std::size_t blocks) {
  if (!file.has(s.lines)) return {};
  const std::span<const std::byte> ends = file.section(s.ends);
  return {{blocks, file.words(s.lines), {reinterpret_cast<const std::uint8_t*>(ends.data()), ends.size()}, file.words(s.wide)},
          file.words(s.edges)};
}

void add_block_edges(std::vector<IndexSectionData>& sections, const BlockEdgeSections& s,
                     const CompactOffsets::Arrays& offsets, std::vector<std::span<const std::byte>> edges) {
  sections.push_back(pieces(s.lines, {bytes_of(offsets.first)}));
  sections.push_back(pieces(s.ends, {bytes_of(offsets.ends)}));
  sections.push_back(pieces(s.wide, {bytes_of(offsets.wide)}));
  sections.push_back(pieces(s.edges, std::move(edges)));
}

// The verdicts as saved; false when a byte is no verdict (a file written by another heapscope).
bool read_verdicts(const IndexFile& file, std::size_t blocks, const std::shared_ptr<const void>& keep, ItemChecks checks,
                   LeakVerdicts& out) {
  const std::span<const std::byte> v = file.section(IndexSection::verdicts);
  const std::span<const std::byte> p = file.section(IndexSection::possibly);
  const std::span<const std::byte> h = file.section(IndexSection::held_by);
  if (v.size() != blocks || p.size() != blocks || (!h.empty() && h.size() != blocks)) return false;
  const auto* vb = reinterpret_cast<const std::uint8_t*>(v.data());
  const auto* pb = reinterpret_cast<const std::uint8_t*>(p.data());
  const bool every_item = checks == ItemChecks::every_item;
  if (every_item && !all_below(std::span(vb, blocks), static_cast<std::uint8_t>(Verdict::cycle_leak) + 1)) return false;
  out.verdict = ViewedArray<Verdict>::viewing({reinterpret_cast<const Verdict*>(vb), blocks}, keep);
  out.possibly = ViewedArray<std::uint8_t>::viewing({pb, blocks}, keep);
  out.held_by = ViewedArray<HeldBy>::viewing({reinterpret_cast<const HeldBy*>(h.data()), h.size()}, keep);
  // The leaked list as saved, when it was (copied: a tenth of the heap's ids at most), else found again (a
  // pass over every verdict). Each id a block's; that it is the list of the verdicts' leaks, the file's
  // checksum says.
  if (!file.has(IndexSection::leaked)) {
    out.leaked = leaked_blocks(out.verdict.span());
    return true;
  }
  const std::span<const std::uint32_t> leaked = file.words(IndexSection::leaked);
  if (every_item && !all_below(leaked, blocks)) return false;
  out.leaked.assign(leaked.begin(), leaked.end());
  return true;
}

}  // namespace

IndexCache::IndexCache(std::string core_path, std::string dir) : core_path_(std::move(core_path)), dir_(std::move(dir)) {
  struct stat st {};
  if (dir_.empty() || ::stat(core_path_.c_str(), &st) != 0) return;
  const std::uint64_t mtime_ns = std::uint64_t(st.st_mtim.tv_sec) * 1000000000u + std::uint64_t(st.st_mtim.tv_nsec);
  core_identity_ = "size=" + std::to_string(st.st_size) + " mtime_ns=" + std::to_string(mtime_ns) +
                   " inode=" + std::to_string(st.st_ino) + " device=" + std::to_string(st.st_dev);
}

std::string IndexCache::key(const Image& image, const SymbolSearchOptions& symbols,
                            const std::vector<const AllocatorPlugin*>& allocators, IdiomSet idioms) const {
  if (core_identity_.empty()) return {};
  static const std::string build = own_build_id();
  std::string key = "heapscope " HEAPSCOPE_VERSION " build " + build + "\n";
  key += "core " + core_identity_ + "\n";
  for (const Module& m : image.modules())
    key += "module " + m.path + " file " + m.file_on_disk + " build-id " + m.build_id + "\n";
  key += "allocators";
  for (const AllocatorPlugin* a : allocators) key += " " + std::string(a->name());
  key += "\nsymbols debug_files=" + std::to_string(symbols.use_debug_files) +
         " debuginfod=" + std::to_string(symbols.use_debuginfod) + " debug_dirs";
  for (const std::string& d : symbols.debug_dirs) key += " " + d;
  key += "\nleak idioms " + std::to_string(idioms);
  return key + "\n";
}

std::string IndexCache::path_for(const std::string& key) const {
  return dir_ + "/" + key_hash_name(key) + kIndexExtension;
}

std::string IndexCache::rejection(const std::string& key, const std::string& why) const {
  return "index cache " + path_for(key) + " not used (" + why + "): computed again";
}

std::unique_ptr<CachedProducts> IndexCache::load(const std::string& key, std::string* note) const {
  note->clear();
  const std::string path = path_for(key);
  std::string error;
  std::unique_ptr<IndexFile> file;
  {
    PhaseTimer timer("cache: load");
    file = IndexFile::open(path, &error);
  }
  if (!file) {
    if (error != "not found") *note = rejection(key, error);
    return nullptr;
  }
  auto fail = [&](const std::string& why) -> std::unique_ptr<CachedProducts> {
    *note = rejection(key, why);
    return nullptr;
  };
  if (section_text(*file, IndexSection::key) != key)
    return fail("made for another core or heapscope");  // a hash collision of two keys' file names
  // Held by every array that views the mapping, for as long as it does.
  const std::shared_ptr<IndexFile> mapped = std::move(file);
  const IndexFile& f = *mapped;
  auto products = std::make_unique<CachedProducts>();
  products->checks = f.as_written() ? ItemChecks::sizes_only : ItemChecks::every_item;
  products->heap = std::make_unique<HeapModel>();
  if (!heap_meta_from_json(section_text(f, IndexSection::heap_meta), *products->heap))
    return fail("damaged heap description");
  const std::size_t blocks = f.section(IndexSection::blocks).size() / sizeof(Block);
  const auto [block_pages, count] = mapped->take_blocks();
  if (count != blocks) return fail("cannot map its blocks");
  products->heap->blocks = BlockArray::adopt_mapping(block_pages, count);
  products->block_pages = U32Array::viewing(f.words(IndexSection::block_pages), mapped);
  if (!read_verdicts(f, blocks, mapped, products->checks, products->verdicts)) return fail("damaged verdicts");
  ReferenceGraph::SavedArrays& g = products->graph;
  g.forward = block_edges_of(f, kForward, blocks);
  g.roots = slice_of(f, IndexSection::root_offsets, IndexSection::root_edges);
  g.reverse = block_edges_of(f, kReverse, blocks);
  g.root_referrers = {f.words(IndexSection::root_referrer_blocks), f.words(IndexSection::root_referrers)};
  g.keep = mapped;
  g.checks = products->checks;
  if (!f.has(kReverse.lines)) return fail("no reverse edges");
  if (f.has(IndexSection::retention_meta)) {
    Retention::Saved& r = products->retention.emplace();
    if (!retention_meta_from_json(section_text(f, IndexSection::retention_meta), r))
      return fail("damaged dominator tree");
    r.idom = f.words(IndexSection::retention_idom);
    r.bytes_low = f.words(IndexSection::retention_bytes_low);
    r.blocks = f.words(IndexSection::retention_blocks);
    const std::span<const std::byte> high = f.section(IndexSection::retention_bytes_high);
    r.bytes_high = {reinterpret_cast<const std::uint8_t*>(high.data()), high.size()};
    r.keep = mapped;
    r.checks = products->checks;
  }
  if (f.has(IndexSection::names_meta))
    products->names = CachedProducts::SavedNames{section_text(f, IndexSection::names_meta),
                                                 f.section(IndexSection::names_ids), mapped};
  if (f.has(IndexSection::objects_meta)) {
    if (!object_headers_from_saved(section_text(f, IndexSection::objects_meta), f.section(IndexSection::objects_starts),
                                   f.section(IndexSection::objects_types), f.section(IndexSection::objects_ends),
                                   f.section(IndexSection::objects_strided),
                                   blocks, mapped, products->checks,
                                   products->object_headers.emplace()))
      return fail("damaged object headers");
  }
  return products;
}

void IndexCache::save(const std::string& key, const HeapModel& heap, const ReferenceGraph& graph,
                      const LeakVerdicts& verdicts, const Retention* retention, const BlockTypes* types,
                      const DwarfTypes* dwarf, const ObjectHeaders* headers) const {
  PhaseTimer timer("cache: write");
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) throw std::runtime_error("cannot create " + dir_ + ": " + ec.message());
  const std::string meta = heap_meta_to_json(heap);
  const std::vector<ReferenceGraph::ForwardPart> forward = graph.forward_parts();
  std::vector<std::span<const std::byte>> forward_edges;
  for (const ReferenceGraph::ForwardPart& p : forward) forward_edges.push_back(bytes_of(p.edges));
  const ReferenceGraph::EdgeSlice roots = graph.root_slice();
  {
    PhaseTimer reverse_timer("cache: write: reverse edges");  // what `retainers` would build otherwise
    graph.reverse_edges();
  }
  const CompactOffsets forward_offsets = graph.forward_offsets();
  const CompactOffsets& reverse_offsets = graph.reverse_offsets();
  const std::span<const std::uint32_t> reverse_edges = graph.reverse_edges();
  const ReferenceGraph::RootReferrers root_referrers = graph.root_referrers();
  const std::span<const Block> blocks(heap.blocks.data(), heap.blocks.size());

  std::vector<IndexSectionData> sections;
  sections.push_back(pieces(IndexSection::key, {text_bytes(key)}));
  sections.push_back(pieces(IndexSection::heap_meta, {text_bytes(meta)}));
  sections.push_back(pieces(IndexSection::blocks, {bytes_of(blocks)}));
  sections.push_back(pieces(IndexSection::block_pages, {bytes_of(graph.index().page_table())}));
  add_block_edges(sections, kForward, forward_offsets.arrays(), forward_edges);
  sections.push_back(pieces(IndexSection::root_offsets, {bytes_of(roots.offsets)}));
  sections.push_back(pieces(IndexSection::root_edges, {bytes_of(roots.edges)}));
  add_block_edges(sections, kReverse, reverse_offsets.arrays(), {bytes_of(reverse_edges)});
  sections.push_back(pieces(IndexSection::root_referrer_blocks, {bytes_of(root_referrers.blocks)}));
  sections.push_back(pieces(IndexSection::root_referrers, {bytes_of(root_referrers.roots)}));
  sections.push_back(pieces(IndexSection::verdicts, {bytes_of(std::span<const Verdict>(verdicts.verdict))}));
  sections.push_back(pieces(IndexSection::possibly, {bytes_of(std::span<const std::uint8_t>(verdicts.possibly))}));
  sections.push_back(pieces(IndexSection::held_by, {bytes_of(std::span<const HeldBy>(verdicts.held_by))}));
  sections.push_back(pieces(IndexSection::leaked, {bytes_of(std::span<const BlockId>(verdicts.leaked))}));
  std::string retention_meta;
  if (retention) {
    const Retention::Saved saved = retention->saved();
    retention_meta = retention_meta_to_json(saved);
    sections.push_back(pieces(IndexSection::retention_meta, {text_bytes(retention_meta)}));
    sections.push_back(pieces(IndexSection::retention_idom, {bytes_of(saved.idom)}));
    sections.push_back(pieces(IndexSection::retention_bytes_low, {bytes_of(saved.bytes_low)}));
    sections.push_back(pieces(IndexSection::retention_blocks, {bytes_of(saved.blocks)}));
    sections.push_back(pieces(IndexSection::retention_bytes_high, {bytes_of(saved.bytes_high)}));
  }
  std::string names_meta;
  if (types && dwarf) {
    names_meta = names_meta_to_json(*types, *dwarf);
    sections.push_back(pieces(IndexSection::names_meta, {text_bytes(names_meta)}));
    sections.push_back(pieces(IndexSection::names_ids, {types->ids().bytes()}));
  }
  std::string objects_meta;
  if (headers) {
    objects_meta = object_headers_meta_to_json(*headers);
    sections.push_back(pieces(IndexSection::objects_meta, {text_bytes(objects_meta)}));
    sections.push_back(pieces(IndexSection::objects_starts, {bytes_of(std::span<const std::uint8_t>(headers->starts))}));
    sections.push_back(pieces(IndexSection::objects_types, {bytes_of(std::span<const std::uint32_t>(headers->type_of))}));
    if (!headers->strided.empty())
      sections.push_back(pieces(IndexSection::objects_strided,
                                {bytes_of(std::span<const ObjectHeaders::StridedBlock>(headers->strided))}));
    if (!headers->object_end_words.empty())
      sections.push_back(
          pieces(IndexSection::objects_ends, {bytes_of(std::span<const std::uint16_t>(headers->object_end_words))}));
  }
  const std::string path = path_for(key);
  write_index_file(path, sections);
  evict(path);
}

void IndexCache::evict(const std::string& keep) const {
  evict_cache_files(dir_, kIndexExtension, kMaxFiles, kMaxBytes, keep);
  // The checked marks of the indexes gone (index_file.h), and those a writer left unfinished.
  std::error_code ec;
  const std::string mark_suffix = checked_mark_path(kIndexExtension);
  for (const fs::directory_entry& e : fs::directory_iterator(dir_, ec)) {
    const std::string name = e.path().filename().string();
    const std::size_t at = name.find(mark_suffix);
    if (at == std::string::npos) continue;
    if (!fs::exists(e.path().parent_path() / (name.substr(0, at) + kIndexExtension), ec) ||
        name.size() != at + mark_suffix.size())
      fs::remove(e.path(), ec);
  }
}

// One block of each of kSampledBlocks equal stretches of the heap's ids, in ascending order, at an offset in
// its stretch that a hash of the stretch's number gives (the first stretch's first block and the heap's last
// block included). Not every stretch's first block: a heap built in a repeating pattern (CPython's dict of
// lists) can put a stretch's start on the same kind of block every time, and then the sample had no
// GC-tracked object in it and took forged object headers for the core's.
std::vector<std::size_t> sample_blocks(std::size_t count) {
  std::vector<std::size_t> sample;
  const std::size_t step = std::max<std::size_t>(1, count / kSampledBlocks);
  std::uint64_t i = 0;
  for (std::size_t start = 0; start < count; start += step, ++i) {
    const std::uint64_t offset = ((i * 0x9e3779b97f4a7c15ull) >> 32) % step;  // Weyl sequence: no period
    sample.push_back(std::min<std::size_t>(count - 1, start + offset));
  }
  if (count > 0 && sample.back() != count - 1) sample.push_back(count - 1);
  return sample;
}

bool check_heap(const Image& image, const HeapModel& heap, std::string* why) {
  for (std::size_t b : sample_blocks(heap.blocks.size())) {
    const Block& blk = heap.blocks[b];
    if (blk.layout != BlockLayout::glibc_chunk || blk.state == BlockState::mmapped) continue;  // no glibc header, or one sized apart
    const std::optional<std::uint64_t> size_field = image.read_u64(blk.chunk + 8);
    if (!size_field) continue;  // not in the core: nothing to compare
    if ((*size_field & ~std::uint64_t{7}) != blk.chunk_size()) {
      *why = "block " + std::to_string(b) + "'s chunk header differs";
      return false;
    }
  }
  return true;
}

namespace {

// Whether `edges`, in the order of what they lead from (a block's reverse edges by source block, as the
// reverse graph is built; a block's root referrers by root range), hold `e`, compared under `order_mask`
// for the order: a binary search, since a block that many point to has millions of them (the linear search
// was a third of a one-block command on swipl's heap). A list out of order (a damaged file) may fail it,
// and the index is refused: no wrong answer follows.
bool contains(std::span<const std::uint32_t> edges, std::uint32_t e, std::uint32_t order_mask = ~0u) {
  auto it = std::lower_bound(edges.begin(), edges.end(), e & order_mask,
                             [order_mask](std::uint32_t a, std::uint32_t key) { return (a & order_mask) < key; });
  for (; it != edges.end() && (*it & order_mask) == (e & order_mask); ++it)
    if (*it == e) return true;
  return false;
}

}  // namespace

bool check_graph(const ReferenceGraph& graph, const LeakVerdicts& verdicts, std::string* why) {
  const BlockArray& blocks = graph.index().blocks();
  for (std::size_t b : sample_rescannable_blocks(blocks)) {
    const auto id = static_cast<BlockId>(b);
    const std::span<const std::uint32_t> saved = graph.out_edges(id);
    const std::vector<std::uint32_t> now = graph.rescan(id);
    if (!std::equal(saved.begin(), saved.end(), now.begin(), now.end())) {
      *why = "block " + std::to_string(b) + "'s edges differ";
      return false;
    }
    for (std::uint32_t e : saved)
      if (!contains(graph.in_edges(edge_target(e)), id | (e & kInteriorBit), ~kInteriorBit)) {
        *why = "block " + std::to_string(b) + "'s reverse edges differ";
        return false;
      }
    const Verdict v = verdicts.verdict[b];
    const bool leaked_yet_rooted = is_leaked(v) && !graph.in_root_edges(id).empty();
    if ((v == Verdict::not_allocated) == is_allocated(blocks[b].state) || leaked_yet_rooted) {
      *why = "block " + std::to_string(b) + "'s verdict is wrong";
      return false;
    }
  }
  for (std::size_t r = 0; r < graph.root_count(); ++r) {
    const std::span<const std::uint32_t> saved = graph.root_edges(r);
    const std::vector<std::uint32_t> now = graph.rescan_root(r);
    if (!std::equal(saved.begin(), saved.end(), now.begin(), now.end())) {
      *why = "root range " + std::to_string(r) + "'s edges differ";
      return false;
    }
    for (std::uint32_t e : saved)
      if (!contains(graph.in_root_edges(edge_target(e)), static_cast<std::uint32_t>(r))) {
        *why = "root range " + std::to_string(r) + "'s reverse edges differ";
        return false;
      }
    progress_check();
  }
  return true;
}

bool check_saved_object_headers(const Image& image, const SymbolIndex& symbols, const HeapModel& heap,
                                const ObjectHeaders& saved, std::string* why) {
  return check_object_headers(image, symbols, heap, saved, sample_blocks(heap.blocks.size()), why);
}

bool check_retention(const Retention& retention, const LeakVerdicts& verdicts, std::string* why) {
  for (std::size_t b : sample_blocks(retention.block_count())) {
    const auto node = static_cast<std::uint32_t>(b);
    const Verdict v = verdicts.verdict[b];
    const bool in_tree = v != Verdict::not_allocated && !is_leaked(v);
    const std::uint32_t up = retention.dominator(node);
    if (retention.reachable(node) != in_tree ||
        (in_tree && retention.retained_bytes(up) < retention.retained_bytes(node))) {
      *why = "block " + std::to_string(b) + "'s dominator is wrong";
      return false;
    }
  }
  return true;
}

}  // namespace heapscope
