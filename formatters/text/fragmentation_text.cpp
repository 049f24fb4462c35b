// Text renderer of the fragmentation report.
#include <algorithm>

#include "formatters/render.h"
#include "formatters/text/text_util.h"

namespace heapscope {

namespace {

std::string arena_name(const ArenaFragmentation& a) {
  return a.is_main ? fmt::format("main 0x{:x}", a.address) : fmt::format("0x{:x}", a.address);
}

void append_arena_table(std::string& out, const FragmentationReport& r) {
  const std::vector<ArenaStateColumn> states = arena_state_columns(r);
  std::size_t width = 10;  // an allocator's own heading ("thread/transfer caches") widens its column
  for (const ArenaStateColumn& c : states) width = std::max(width, c.heading.size());
  out += fmt::format("\n{:<22} {:>{}} {:>10}", r.terms.arena, r.terms.heaps, std::max<std::size_t>(5, r.terms.heaps.size()),
                     "system");
  for (const ArenaStateColumn& c : states) out += fmt::format(" {:>{}}", c.heading, width);
  out += fmt::format(" {:>10} {:>12}\n", "overhead", "largest free");
  for (const ArenaFragmentation& a : r.arenas) {
    out += fmt::format("{:<22} {:>{}} {:>10}", arena_name(a), a.heaps, std::max<std::size_t>(5, r.terms.heaps.size()),
                       text::bytes(a.system_bytes));
    for (const ArenaStateColumn& c : states) out += fmt::format(" {:>{}}", text::bytes(a.*c.bytes), width);
    out += fmt::format(" {:>10} {:>12}\n", text::bytes(a.overhead_bytes), text::bytes(a.largest_free_chunk));
  }
}

void append_release_table(std::string& out, const FragmentationReport& r) {
  out += "\nWhat could go back to the system (returned: the arena's system bytes shrink; madvised: the pages stay\n"
         "mapped but stop counting as resident):\n";
  out += fmt::format("{:<22} {:>16} {:>24} {:>24}\n", "arena", "free() trim now", "malloc_trim(0) returned",
                     "malloc_trim(0) madvised");
  for (const ArenaFragmentation& a : r.arenas)
    if (a.trim_known)
      out += fmt::format("{:<22} {:>16} {:>24} {:>24}\n", arena_name(a), text::bytes(a.trim_on_free),
                         text::bytes(a.malloc_trim_returned), text::bytes(a.malloc_trim_madvised));
    else
      out += fmt::format("{:<22} not available: heapscope knows no trimming rules of this heap's allocator\n",
                         arena_name(a));
}

void append_blockers(std::string& out, const ArenaFragmentation& a) {
  if (a.blockers.empty()) return;
  out += fmt::format("\nTrim blockers of arena {} (nearest the heap's end first; returnable: more bytes malloc_trim(0)\n"
                     "would give back were this chunk and those above it freed):\n",
                     arena_name(a));
  out += fmt::format("  {:>12} {:>12}  {:<7} {}\n", "above it", "returnable", "state", "block");
  for (const TrimBlocker& b : a.blockers)
    out += fmt::format("  {:>12} {:>12}  {:<7} {}\n", text::bytes(b.bytes_above), text::bytes(b.returnable_if_freed),
                       b.state, text::block_line(b.block));
}

std::string bar(std::uint64_t n, std::uint64_t total) {
  constexpr std::uint64_t kWidth = 30;
  const std::uint64_t len = total ? (n * kWidth + total - 1) / total : 0;
  return std::string(len, '#');
}

void append_histogram(std::string& out, const FragmentationReport& r) {
  out += fmt::format("\nOccupancy: share of each {} page and {} region used by live blocks ({} not counted):\n",
                     text::bytes(r.page_bytes), text::bytes(r.region_bytes),
                     has_top_chunks(r) ? "top chunks and mmapped chunks" : "blocks outside the heap's pages");
  out += fmt::format("  {:<10} {:>9} {:>9}\n", "used", "pages", "regions");
  for (int i = 0; i < kFillBucketCount; ++i) {
    const std::string range = fmt::format("{}–{} %", i * 10, i * 10 + 10);
    out += fmt::format("  {:<10} {:>9} {:>9}  {}\n", range, r.page_fill[i], r.region_fill[i], bar(r.page_fill[i], r.pages));
  }
  out += fmt::format("  {:<10} {:>9} {:>9}\n", "all", r.pages, r.regions);
}

void append_type_rows(std::string& out, const std::vector<FragmentationTypeRow>& rows) {
  out += fmt::format("  {:>9} {:>10}  {}\n", "blocks", "bytes", "type");
  for (const FragmentationTypeRow& row : rows) {
    out += fmt::format("  {:>9} {:>10}  {}\n", row.count, text::bytes(row.bytes), row.type);
    for (const FragmentationSample& sample : row.samples) {
      out += fmt::format("     e.g. {}\n", text::block_line(sample.block));
      if (sample.path)
        text::append_path(out, sample.path);
      else
        out += "     no root reaches it\n";
    }
  }
}

// A slab allocator's classes: how full their slabs are, and the free pages it keeps for reuse.
void append_size_classes(std::string& out, const FragmentationReport& r) {
  if (!r.size_classes.empty()) {
    const AllocatorTerms& t = r.terms;
    out += fmt::format("\n{} (objects in use of all the {}s' objects; {}):\n", t.size_class_heading(), t.slab,
                       t.cached_meaning);
    out += fmt::format("  {:>9} {:>7} {:>10} {:>9} {:>9} {:>9}  {}\n", "size", t.slab + "s", "bytes", "in use", t.cached,
                       "free", "used");
    for (const SizeClassUse& c : r.size_classes) {
      const double used = c.objects() ? 100.0 * static_cast<double>(c.in_use) / static_cast<double>(c.objects()) : 0;
      out += fmt::format("  {:>9} {:>7} {:>10} {:>9} {:>9} {:>9}  {:5.1f} %\n", c.object_bytes, c.slabs,
                         text::bytes(c.slab_bytes), c.in_use, c.cached, c.free, used);
    }
  }
  if (!r.free_pages.empty()) {
    out += "\nFree pages kept for reuse:\n";
    for (const FreePages& f : r.free_pages)
      out += fmt::format("  {:<16} {:>10} in {} run{}: {}\n", f.kind, text::bytes(f.bytes), f.runs,
                         f.runs == 1 ? "" : "s", f.meaning);
  }
}

}  // namespace

std::string render_text(const FragmentationReport& r) {
  std::string out = "Heap fragmentation";
  if (r.trim_threshold && r.top_pad)
    out += fmt::format(" (trim threshold {}, top pad {})", text::bytes(*r.trim_threshold), text::bytes(*r.top_pad));
  out += "\n";
  if (r.partial)
    out += fmt::format("PARTIAL: {} of damaged heap were not walked and are not counted below (see the warnings)\n",
                       text::bytes(r.skipped_bytes));
  append_arena_table(out, r);
  if (r.trim_unavailable.empty())
    append_release_table(out, r);
  else
    out += fmt::format("\nWhat could go back to the system: {}\n", r.trim_unavailable);
  for (const ArenaFragmentation& a : r.arenas) append_blockers(out, a);
  append_size_classes(out, r);
  append_histogram(out, r);

  const std::uint64_t sparse_pages = r.page_fill[0];
  out += fmt::format("\nLive blocks in pages at most 10 % used ({} of {} pages): {} blocks, {}, {} type{}\n", sparse_pages,
                     r.pages, r.sparse_blocks, text::bytes(r.sparse_bytes), r.sparse_type_count,
                     r.sparse_type_count == 1 ? "" : "s");
  if (!r.sparse_types.empty()) append_type_rows(out, r.sparse_types);
  if (!r.blocker_types.empty()) {
    out += "\nLive trim blockers by type:\n";
    append_type_rows(out, r.blocker_types);
  }
  text::append_warnings(out, r.warnings);
  return out;
}

}  // namespace heapscope
