#include "queries/leak_report.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <span>
#include <tuple>

#include <fmt/format.h>
#include "base/phase_timer.h"
#include "base/progress.h"
#include "base/workers.h"
#include "model/collector_reach.h"
#include "queries/naming_tally.h"
#include "queries/process_summary.h"
#include "types/content_naming.h"

namespace heapscope {
namespace {

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

// One slice of the leaked blocks (in block order), tallied by group on a worker of its own.
struct LeakSlice {
  struct Group {
    LeakGroup totals;     // counts and bytes only
    BlockId first = 0;    // the slice's first block of the group: it names the group
    // Who may be an example, in block order: the blocks that start a lost structure (direct or cycle)
    // and the indirect ones before the group's first direct leak in the slice, at most `examples` of each.
    std::vector<std::pair<BlockId, Verdict>> candidates;
    std::size_t starts = 0, early_indirect = 0;  // candidates of each kind so far
  };
  std::map<std::pair<std::uint32_t, std::uint64_t>, Group> groups;  // by type id and size
  NamingTally named;
  StateTotal leaked, direct, indirect, cycle;
};

LeakSlice tally_slice(const HeapModel& heap, const LeakVerdicts& v, const BlockTypes& types,
                      std::span<const BlockId> leaked, std::size_t examples) {
  LeakSlice out;
  LeakSlice::Group* last = nullptr;  // neighbouring leaked blocks are mostly of one group (a lost structure)
  std::pair<std::uint32_t, std::uint64_t> last_key{BlockTypes::kUnknown, ~std::uint64_t{0}};
  for (std::size_t k = 0; k < leaked.size(); ++k) {
    if ((k & kCheckMask) == 0) progress_check();
    const BlockId i = leaked[k];
    const std::uint64_t size = heap.blocks[i].usable_size();
    const std::pair<std::uint32_t, std::uint64_t> key{types.type_id(i), size};
    if (!last || key != last_key) {
      auto [it, fresh] = out.groups.try_emplace(key);
      if (fresh) it->second.first = i;
      last = &it->second;
      last_key = key;
    }
    LeakSlice::Group& g = *last;
    out.named.add(types.naming_of(key.first), size);
    g.totals.size = size;
    ++g.totals.count;
    g.totals.bytes += size;
    out.leaked.add(size);
    const Verdict verdict = v.verdict[i];
    switch (verdict) {
      case Verdict::direct_leak: ++g.totals.direct; out.direct.add(size); break;
      case Verdict::indirect_leak: ++g.totals.indirect; out.indirect.add(size); break;
      default: ++g.totals.cycle; out.cycle.add(size); break;
    }
    if (verdict != Verdict::indirect_leak && g.starts < examples) {
      g.candidates.emplace_back(i, verdict);
      ++g.starts;
    } else if (verdict == Verdict::indirect_leak && g.totals.direct == 0 && g.early_indirect < examples) {
      g.candidates.emplace_back(i, verdict);
      ++g.early_indirect;
    }
  }
  return out;
}

// The blocks reached only through pointers into their interiors, among blocks [first, last).
StateTotal possibly_reachable(const HeapModel& heap, const LeakVerdicts& v, std::size_t first, std::size_t last) {
  StateTotal out;
  const std::uint8_t* flags = v.possibly.data();
  for (std::size_t part = first; part < last; part += kCheckMask + 1) {
    progress_check();
    const std::size_t end = std::min(last, part + kCheckMask + 1);
    for (std::size_t i = part; i < end;) {
      std::uint64_t eight = 0;  // most blocks are not "possibly": eight flags at a time are mostly 0
      if (i + 8 <= end && (std::memcpy(&eight, flags + i, 8), eight == 0)) {
        i += 8;
        continue;
      }
      if (flags[i]) out.add(heap.blocks[i].usable_size());
      ++i;
    }
  }
  return out;
}

// The blocks an interior-pointer idiom alone holds, by idiom and offset, most bytes first.
std::vector<LeaksReport::IdiomTotal> held_by_idioms(const HeapModel& heap, const LeakVerdicts& v) {
  std::map<HeldBy, StateTotal> by_held;
  for (std::size_t b = 0; b < v.held_by.size(); ++b)
    if (v.held_by[b]) by_held[v.held_by[b]].add(heap.blocks[b].usable_size());
  std::vector<LeaksReport::IdiomTotal> out;
  for (const auto& [held, total] : by_held)
    out.push_back({std::string(idiom_name(held_idiom(held))), held_offset(held), total});
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.total.bytes > b.total.bytes; });
  return out;
}

void add_total(StateTotal& to, const StateTotal& from) {
  to.blocks += from.blocks;
  to.bytes += from.bytes;
}

// The groups, namings and totals of `blocks` (leaked ones, in block order), tallied in slices on all cores
// and summed in block order: a name is made once per group, not once per block of millions.
struct LeakTally {
  std::vector<LeakGroup> groups;  // by bytes, largest first
  std::vector<NamingShare> named;
  StateTotal leaked, direct, indirect, cycle;
};

LeakTally tally_leaked(Session& s, std::span<const BlockId> blocks, std::size_t examples) {
  const HeapModel& heap = s.heap();
  const LeakVerdicts& v = s.verdicts();
  const BlockTypes& types = s.leak_names().types;
  const unsigned n = worker_count(blocks.size(), std::size_t{1} << 16);
  std::vector<LeakSlice> slices(n);
  run_workers(n, [&](unsigned w) {
    const auto [first, last] = slice_of(blocks.size(), n, w);
    slices[w] = tally_slice(heap, v, types, blocks.subspan(first, last - first), examples);
  });
  struct Grouped {
    LeakGroup group;
    BlockId first = 0;  // names the group
  };
  std::map<std::pair<std::uint32_t, std::uint64_t>, Grouped> groups;
  NamingTally named;
  LeakTally out;
  for (LeakSlice& slice : slices) {
    named.add(slice.named);
    add_total(out.leaked, slice.leaked);
    add_total(out.direct, slice.direct);
    add_total(out.indirect, slice.indirect);
    add_total(out.cycle, slice.cycle);
    for (auto& [key, part] : slice.groups) {
      auto [it, fresh] = groups.try_emplace(key);
      LeakGroup& g = it->second.group;
      if (fresh) it->second.first = part.first;
      // Direct leaks make the best examples: they are where each lost structure starts; an indirect one
      // serves only while no direct leak of its group came before it (in this slice or an earlier one).
      for (const auto& [block, verdict] : part.candidates) {
        if (g.examples.size() >= examples) break;
        if (verdict == Verdict::indirect_leak && g.direct > 0) continue;
        g.examples.push_back(heap.blocks[block].address());
        g.example_texts.push_back(text_preview(s.image(), heap.blocks[block]).value_or(""));
      }
      g.size = part.totals.size;
      g.count += part.totals.count;
      g.bytes += part.totals.bytes;
      g.direct += part.totals.direct;
      g.indirect += part.totals.indirect;
      g.cycle += part.totals.cycle;
    }
  }
  out.named = named.shares();
  for (auto& [key, grouped] : groups) {
    LeakGroup& g = grouped.group;
    g.type = types.name(grouped.first, heap.blocks[grouped.first]);
    g.naming = naming_name(types.naming_of(key.first));
    out.groups.push_back(std::move(g));
  }
  // By bytes, largest first; equal bytes by name, then size.
  std::sort(out.groups.begin(), out.groups.end(), [](const LeakGroup& a, const LeakGroup& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : std::tie(a.type, a.size) < std::tie(b.type, b.size);
  });
  return out;
}

// The bytes of the collector's pages that hold garbage and nothing it keeps: what its next collection
// gives back to its free pages whole (Boehm: what GC_get_free_bytes() grows by). A page's free objects hold
// it no more than its garbage does; an object on a thread's local free list, or one it keeps, does. An
// object of a page or more is a run of pages of its own.
std::uint64_t freed_page_bytes(const HeapModel& heap, const LeakVerdicts& v, const CollectorRules& rules) {
  const std::uint64_t page = rules.page_bytes;
  std::uint64_t freed = 0;
  Address current = ~Address{0};
  bool garbage = false, held = false;
  const auto close = [&] {
    if (garbage && !held) freed += page;
  };
  for (const HeapSegment& section : heap.arenas[rules.arena].heaps) {
    const auto [first, last] = heap.blocks_between(section.start, section.end);
    for (std::size_t b = first; b < last; ++b) {
      const Block& blk = heap.blocks[b];
      const bool collected = collectable(heap, blk) && is_leaked(v.verdict[b]);
      if (blk.chunk_size() >= page) {
        if (collected) freed += (blk.chunk_size() + page - 1) / page * page;
        continue;
      }
      if (const Address at = blk.chunk & ~(page - 1); at != current) {
        close();
        current = at;
        garbage = held = false;
      }
      garbage = garbage || collected;
      held = held || (!collected && blk.state != BlockState::free);
    }
  }
  close();
  return freed;
}

}  // namespace

LeaksReport build_leaks_report(Session& s, std::size_t examples) {
  const HeapModel& heap = s.heap();
  const LeakVerdicts& v = s.verdicts();
  PhaseTimer timer("leak report");
  LeaksReport r;
  // A collector's garbage is counted apart from the leaks: its next collection frees it.
  std::vector<BlockId> leaked, garbage;
  if (heap.collector) {
    for (const BlockId b : v.leaked) (collectable(heap, heap.blocks[b]) ? garbage : leaked).push_back(b);
  }
  LeakTally leaks = tally_leaked(s, heap.collector ? std::span<const BlockId>(leaked) : std::span(v.leaked), examples);
  r.groups = std::move(leaks.groups);
  r.named = std::move(leaks.named);
  r.leaked = leaks.leaked;
  r.direct = leaks.direct;
  r.indirect = leaks.indirect;
  r.cycle = leaks.cycle;
  if (heap.collector) {
    LeakTally collected = tally_leaked(s, garbage, examples);
    r.collectable = LeaksReport::Collectable{.collector = heap.collector->name,
                                             .total = collected.leaked,
                                             .whole_page_bytes = freed_page_bytes(heap, v, *heap.collector),
                                             .groups = std::move(collected.groups)};
  }
  const unsigned n = worker_count(v.possibly.size(), std::size_t{1} << 16);
  std::vector<StateTotal> possibly(n);
  run_workers(n, [&](unsigned w) {
    const auto [from, to] = slice_of(v.possibly.size(), n, w);
    possibly[w] = possibly_reachable(heap, v, from, to);
  });
  for (const StateTotal& p : possibly) add_total(r.possibly, p);
  r.modules_without_symbols = modules_without_file(s.image());
  r.graph_edges = s.graph().edge_count();
  if (const std::optional<ObjectHeaders>& headers = s.object_headers()) {
    r.object_headers = headers->layout;
    r.object_header_blocks = headers->count;
  }
  r.held_by_idioms = held_by_idioms(heap, v);
  const StateTotals totals = heap.totals();
  for (const BlockState state : {BlockState::in_use, BlockState::mmapped})
    add_total(r.in_use, totals[static_cast<int>(state)]);
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
