#include "queries/leak_report.h"

#include <algorithm>
#include <map>
#include <tuple>

#include <fmt/format.h>
#include "base/progress.h"
#include "queries/naming_tally.h"
#include "queries/process_summary.h"
#include "types/content_naming.h"

namespace heapscope {
namespace {

// The query's own loops look for Ctrl-C every 65536 blocks (base/progress.h).
constexpr std::uint64_t kCheckMask = 0xffff;

// What the image lacks that could hold pointers to heap blocks ("3 thread stacks and 8192 bytes of
// writable memory"), empty when nothing.
std::string unseen_memory(const Image& image) {
  const std::size_t stacks = threads_without_stack(image).size();
  const std::uint64_t bytes = missing_writable_bytes(image);
  std::vector<std::string> parts;
  // A core without thread notes (cut before them) has no registers at all.
  if (image.threads().empty()) parts.push_back("every thread's registers (the image has no threads)");
  if (stacks) parts.push_back(fmt::format("{} thread stack{}", stacks, stacks == 1 ? "" : "s"));
  if (bytes) parts.push_back(fmt::format("{} bytes of writable memory", bytes));
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) out += (i == 0 ? "" : " and ") + parts[i];
  return out.empty() ? out : out + (parts.size() == 1 && !image.threads().empty() ? " is" : " are");
}

// A program may link its own malloc (a static jemalloc or tcmalloc), which no plug-in finds without the
// program's symbols: without its file, libc's heap is walked, nearly empty, while the program's blocks lie
// in anonymous memory outside it. Empty unless the program's file is missing and that memory outweighs
// the heap walked.
std::string heap_the_program_may_hide(Session& s) {
  constexpr std::uint64_t kNoticeable = 1 << 20;
  const Module* exe = s.image().main_executable();
  if (!exe || !exe->file_on_disk.empty()) return {};
  const OutsideMalloc outside = outside_malloc(s);
  const std::uint64_t walked = s.heap().totals()[static_cast<std::size_t>(BlockState::in_use)].bytes;
  if (outside.bytes < std::max(kNoticeable, walked)) return {};
  auto mib = [](std::uint64_t bytes) {
    return bytes < kNoticeable ? fmt::format("{} bytes", bytes)
                               : fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20));
  };
  return fmt::format("the program's file is missing, and {} of anonymous memory in {} mappings lies outside the {} "
                     "heap walked here ({} in use): if {} links its own malloc (a static jemalloc or tcmalloc), "
                     "its blocks are there, not in this report. Give the program's file with --exe",
                     mib(outside.bytes), outside.mappings, s.heap().allocator, mib(walked), exe->name());
}

}  // namespace

LeaksReport build_leaks_report(Session& s, std::size_t examples) {
  const HeapModel& heap = s.heap();
  const LeakVerdicts& v = s.verdicts();
  const BlockTypes& types = s.leak_names().types;
  LeaksReport r;
  // Grouped by type id and size, which is grouping by name and size (one id per name; an unnamed block's
  // name is its size): a name is made once per group, not once per block of millions.
  struct Grouped {
    LeakGroup group;
    BlockId first = 0;  // names the group
  };
  std::map<std::pair<std::uint32_t, std::uint64_t>, Grouped> groups;
  Grouped* last = nullptr;  // neighbouring leaked blocks are mostly of one group (a lost structure)
  std::pair<std::uint32_t, std::uint64_t> last_key{BlockTypes::kUnknown, ~std::uint64_t{0}};
  NamingTally named;
  for (std::size_t i = 0; i < v.possibly.size(); ++i) {
    if ((i & kCheckMask) == 0) progress_check();
    if (v.possibly[i]) r.possibly.add(heap.blocks[i].usable_size());
  }
  for (std::size_t k = 0; k < v.leaked.size(); ++k) {  // in block order
    if ((k & kCheckMask) == 0) progress_check();
    const BlockId i = v.leaked[k];
    const Block& b = heap.blocks[i];
    const std::pair<std::uint32_t, std::uint64_t> key{types.type_id(i), b.usable_size()};
    if (!last || key != last_key) {
      auto [it, fresh] = groups.try_emplace(key);
      if (fresh) it->second.first = i;
      last = &it->second;
      last_key = key;
    }
    LeakGroup& g = last->group;
    named.add(types.naming_of(key.first), b.usable_size());
    g.size = b.usable_size();
    ++g.count;
    g.bytes += b.usable_size();
    r.leaked.add(b.usable_size());
    switch (v.verdict[i]) {
      case Verdict::direct_leak: ++g.direct; r.direct.add(b.usable_size()); break;
      case Verdict::indirect_leak: ++g.indirect; r.indirect.add(b.usable_size()); break;
      default: ++g.cycle; r.cycle.add(b.usable_size()); break;
    }
    // Direct leaks make the best examples: they are where each lost structure starts.
    if (g.examples.size() < examples && (v.verdict[i] != Verdict::indirect_leak || g.direct == 0)) {
      g.examples.push_back(b.address());
      g.example_texts.push_back(text_preview(s.image(), b).value_or(""));
    }
  }
  r.named = named.shares();
  for (auto& [key, grouped] : groups) {
    LeakGroup& g = grouped.group;
    g.type = types.name(grouped.first, heap.blocks[grouped.first]);
    g.naming = naming_name(types.naming_of(key.first));
    r.groups.push_back(std::move(g));
  }
  // By bytes, largest first; equal bytes by name, then size.
  std::sort(r.groups.begin(), r.groups.end(), [](const LeakGroup& a, const LeakGroup& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : std::tie(a.type, a.size) < std::tie(b.type, b.size);
  });
  r.modules_without_symbols = modules_without_file(s.image());
  r.graph_edges = s.graph().edge_count();
  if (const std::optional<ObjectHeaders>& headers = s.object_headers()) {
    r.object_headers = headers->layout;
    r.object_header_blocks = headers->count;
  }
  // Say so first: the warnings below say where and why.
  if (const std::string unseen = unseen_memory(s.image()); !unseen.empty()) {
    r.partial = true;
    r.warnings.insert(r.warnings.begin(), "partial result: " + unseen +
                                              " missing from the image, so their pointers were not seen: blocks only "
                                              "they point to are reported as leaked");
  }
  if (const std::string hidden = heap_the_program_may_hide(s); !hidden.empty()) {
    r.partial = true;
    r.warnings.insert(r.warnings.begin(), "partial result: " + hidden);
  }
  if (!s.heap().complete) {
    r.partial = true;
    r.warnings.insert(r.warnings.begin(), "partial result: the heap walk skipped damaged or unreadable parts of the "
                                          "heap (run `verify` for details); blocks there are not in this report");
  }
  return r;
}

namespace {

void add_block(HistogramRow& row, const Block& b, bool leaked, std::size_t examples) {
  if (row.examples.size() < examples) row.examples.push_back(b.address());
  ++row.count;
  row.bytes += b.usable_size();
  if (!leaked) return;
  ++row.leaked_count;
  row.leaked_bytes += b.usable_size();
}

// Rows of one source location: each of its types' rows summed, its types listed by bytes.
std::vector<HistogramRow> by_source(const std::vector<HistogramRow>& by_type, std::size_t examples) {
  std::map<std::string, HistogramRow> rows;
  for (const HistogramRow& t : by_type) {
    HistogramRow& row = rows[t.source];
    row.source = t.source;
    row.types.push_back(t.type);
    row.count += t.count;
    row.bytes += t.bytes;
    row.leaked_count += t.leaked_count;
    row.leaked_bytes += t.leaked_bytes;
    row.examples.insert(row.examples.end(), t.examples.begin(), t.examples.end());
  }
  std::vector<HistogramRow> out;
  for (auto& [source, row] : rows) {
    std::sort(row.examples.begin(), row.examples.end());
    if (row.examples.size() > examples) row.examples.resize(examples);
    out.push_back(std::move(row));
  }
  return out;
}

}  // namespace

HistogramReport build_histogram(Session& s, const std::string& by, std::size_t examples) {
  const HeapModel& heap = s.heap();
  const LeakVerdicts& v = s.verdicts();
  const BlockTypes& types = s.types();
  HistogramReport r;
  r.by = by;
  std::map<std::string, HistogramRow> rows;
  for (std::size_t i = 0; i < heap.blocks.size(); ++i) {
    if ((i & kCheckMask) == 0) progress_check();
    const Block& b = heap.blocks[i];
    if (!is_allocated(b.state)) continue;
    ++r.allocated_blocks;
    const std::uint32_t type = types.type_id(i);
    if (type != BlockTypes::kUnknown) ++r.typed_blocks;
    HistogramRow& row = rows[types.name(i, b)];
    row.source = types.source_of(type);
    row.naming = naming_name(types.naming_of(type));
    add_block(row, b, is_leaked(v.verdict[i]), examples);
  }
  for (auto& [name, row] : rows) {
    row.type = name;
    r.rows.push_back(std::move(row));
  }
  auto most_bytes_first = [](auto& a, auto& b) { return a.bytes > b.bytes; };
  std::stable_sort(r.rows.begin(), r.rows.end(), most_bytes_first);
  if (by == "source") {
    r.rows = by_source(r.rows, examples);
    std::stable_sort(r.rows.begin(), r.rows.end(), most_bytes_first);
  }
  return r;
}

}  // namespace heapscope
