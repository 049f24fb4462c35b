#include "queries/process_summary.h"

#include <algorithm>
#include <utility>

#include "symbols/debug_packages.h"

namespace heapscope {

namespace {

std::string symbol_source(const Session& s, const Module& m) {
  if (m.file_on_disk.empty()) return "no file";
  const ModuleSymbols* syms = s.symbols().symbols_for(m);
  if (!syms) return "unreadable";
  if (!syms->debug_file().empty()) return "debug file " + syms->debug_file();
  return syms->has_local_symbols() ? "symtab" : "dynsym only";
}

const char* file_origin_name(ModuleFileOrigin origin) {
  switch (origin) {
    case ModuleFileOrigin::exe_option: return "--exe";
    case ModuleFileOrigin::sysroot: return "sysroot";
    case ModuleFileOrigin::debuginfod: return "debuginfod";
    case ModuleFileOrigin::recorded_path: break;
  }
  return "path";
}

// A pseudo-module ([vdso]) has no file to miss.
bool is_pseudo_module(const Module& m) { return !m.path.empty() && m.path.front() == '['; }

// Where the module's file, symbols and DWARF came from, what is missing, and what would install it.
ModuleRow module_row(const Session& s, const Module& m) {
  ModuleRow row;
  row.path = m.path;
  row.load_bias = m.load_bias;
  row.build_id = m.build_id;
  row.symbols = symbol_source(s, m);
  row.file = m.file_on_disk;
  row.file_origin = m.file_on_disk.empty() ? "none" : file_origin_name(m.file_origin);
  row.symtab_source = row.dwarf_source = "none";
  const ModuleSymbols* syms = m.file_on_disk.empty() ? nullptr : s.symbols().symbols_for(m);
  if (syms) {
    row.debug_file = syms->debug_file();
    row.symtab_source = syms->symtab_source() != DebugSource::none ? debug_source_name(syms->symtab_source()) : "dynsym";
    row.dwarf_source = debug_source_name(syms->dwarf_source());
  }
  if (is_pseudo_module(m)) return row;
  if (!syms) {
    row.missing.push_back("module file");
    return row;
  }
  if (syms->symtab_source() == DebugSource::none) row.missing.push_back("symbol table");
  if (syms->dwarf_source() == DebugSource::none) {
    row.missing.push_back("DWARF");
    row.install_hint = debug_package_hint(m.path);
  }
  return row;
}

TypedShare typed_share(const HeapModel& heap, const BlockTypes& types) {
  TypedShare share;
  for (std::size_t i = 0; i < heap.blocks.size(); ++i) {
    const Block& b = heap.blocks[i];
    if (!is_allocated(b.state)) continue;
    share.in_use_blocks += 1;
    share.in_use_bytes += b.usable_size();
    if (types.type_id(i) == BlockTypes::kUnknown) continue;
    share.blocks += 1;
    share.bytes += b.usable_size();
  }
  return share;
}

// Ranges some walk accounts for: heap segments, mmapped chunks (their whole mapping), the mappings holding
// a thread's stack, live or exited, and the modules' writable segments (a .bss past the file's last page
// is anonymous memory too).
std::vector<std::pair<Address, Address>> accounted_ranges(Session& s, const HeapModel& heap) {
  std::vector<std::pair<Address, Address>> ranges;
  for (const ArenaInfo& arena : heap.arenas)
    for (const HeapSegment& seg : arena.heaps) ranges.emplace_back(seg.start, seg.end);
  for (const Block& b : heap.blocks)
    if (b.state == BlockState::mmapped) {
      const MemoryRegion* region = s.image().region_at(b.chunk);
      ranges.emplace_back(region ? region->start : b.chunk, region ? region->end : b.chunk + b.chunk_size());
    }
  for (const ThreadState& t : s.image().threads())
    if (const MemoryRegion* region = s.image().region_at(t.sp())) ranges.emplace_back(region->start, region->end);
  for (const LibcThread& t : s.libc_threads().threads)
    if (t.stack_start < t.stack_end) ranges.emplace_back(t.stack_start, t.stack_end);
  for (const RootRange& root : s.roots().ranges)
    if (root.kind == RootKind::global) ranges.emplace_back(root.start, root.end);
  std::sort(ranges.begin(), ranges.end());
  return ranges;
}

// Bytes of [start, end) outside every range of `sorted`.
std::uint64_t uncovered_bytes(Address start, Address end, const std::vector<std::pair<Address, Address>>& sorted) {
  std::uint64_t covered = 0;
  Address at = start;
  for (const auto& [lo, hi] : sorted) {
    if (hi <= at) continue;
    if (lo >= end) break;
    const Address from = std::max(lo, at), to = std::min(hi, end);
    if (from < to) covered += to - from;
    at = std::max(at, to);
  }
  return (end - start) - covered;
}

OutsideMalloc outside_malloc(Session& s, const HeapModel& heap) {
  constexpr std::size_t kLargest = 5;
  const auto accounted = accounted_ranges(s, heap);
  OutsideMalloc out;
  for (const MemoryRegion& r : s.image().regions()) {
    if (!r.writable || !r.backing_path.empty()) continue;  // file mappings are the modules' and files'
    const std::uint64_t bytes = uncovered_bytes(r.start, r.end, accounted);
    if (bytes == 0) continue;
    out.bytes += bytes;
    ++out.mappings;
    out.largest.push_back({r.start, r.end, bytes});
  }
  std::stable_sort(out.largest.begin(), out.largest.end(),
                   [](const AnonymousMapping& a, const AnonymousMapping& b) { return a.outside_bytes > b.outside_bytes; });
  if (out.largest.size() > kLargest) out.largest.resize(kLargest);
  return out;
}

}  // namespace

SummaryReport build_summary_report(Session& s) {
  SummaryReport r;
  const Image& image = s.image();
  r.target = image.description();
  r.pid = image.pid();
  if (const Module* exe = image.main_executable()) r.executable = exe->path;
  for (const ThreadState& t : image.threads()) r.threads.push_back({t.tid, t.name});
  for (const Module& m : image.modules()) r.modules.push_back(module_row(s, m));
  try {
    const HeapModel& heap = s.heap();
    r.allocator = heap.allocator;
    r.version = heap.version;
    r.heap_complete = heap.complete;
    r.discovery = heap.discovery;
    r.arenas = heap.arenas;
    r.mmapped = heap.mmapped_total;
    r.totals = heap.totals();
    r.mallinfo = heap.mallinfo;
    r.typed = typed_share(heap, s.types());
    r.outside_malloc = outside_malloc(s, heap);
  } catch (const AnalysisError& e) {
    r.heap_error = e.what();  // the process overview is still worth showing
  }
  return r;
}

}  // namespace heapscope
