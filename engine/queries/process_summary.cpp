#include "queries/process_summary.h"

#include "queries/allocation_sites.h"

#include <algorithm>
#include <future>
#include <map>

#include "image/process_arguments.h"
#include "queries/naming_tally.h"
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
  if (syms->dwarf_source() == DebugSource::none) row.missing.push_back("DWARF");
  return row;
}

// What would install the DWARF the rows miss, looked up for all of them at once (one `dpkg -S`).
void add_install_hints(std::vector<ModuleRow>& rows) {
  std::vector<ModuleRow*> lacking;
  std::vector<std::string> paths;
  for (ModuleRow& row : rows) {
    if (std::find(row.missing.begin(), row.missing.end(), "DWARF") == row.missing.end()) continue;
    lacking.push_back(&row);
    paths.push_back(row.path);
  }
  const std::vector<std::string> hints = debug_package_hints(paths);
  for (std::size_t i = 0; i < lacking.size(); ++i) lacking[i]->install_hint = hints[i];
}

TypedShare typed_share(const HeapModel& heap, const BlockTypes& types) {
  TypedShare share;
  NamingTally by_naming;
  for (std::size_t i = 0; i < heap.blocks.size(); ++i) {
    const Block& b = heap.blocks[i];
    if (!is_allocated(b.state)) continue;
    share.in_use_blocks += 1;
    share.in_use_bytes += b.usable_size();
    by_naming.add(types.naming(i), b.usable_size());
    if (types.type_id(i) == BlockTypes::kUnknown) continue;
    share.blocks += 1;
    share.bytes += b.usable_size();
  }
  share.by_naming = by_naming.shares();
  return share;
}

}  // namespace

// What the roots call anonymous memory is exactly what no walk accounts for: writable anonymous memory left
// once the heap, the stacks (live and exited), the modules' segments and the TLS blocks are carved out
// (model/roots.cpp). Summed per mapping, as the roots split around heap memory belong to one.
OutsideMalloc outside_malloc(Session& s) {
  constexpr std::size_t kLargest = 5;
  std::map<Address, AnonymousMapping> by_mapping;
  for (const RootRange& r : s.roots().ranges) {
    if (r.kind != RootKind::anonymous) continue;
    const MemoryRegion* region = s.image().region_at(r.start);
    AnonymousMapping& m = by_mapping[region ? region->start : r.start];
    m.start = region ? region->start : r.start;
    m.end = region ? region->end : r.end;
    m.outside_bytes += r.end - r.start;
  }
  OutsideMalloc out;
  for (const auto& [start, m] : by_mapping) {
    out.bytes += m.outside_bytes;
    out.largest.push_back(m);
  }
  out.mappings = out.largest.size();
  std::stable_sort(out.largest.begin(), out.largest.end(),
                   [](const AnonymousMapping& a, const AnonymousMapping& b) { return a.outside_bytes > b.outside_bytes; });
  if (out.largest.size() > kLargest) out.largest.resize(kLargest);
  return out;
}

SummaryReport build_summary_report(Session& s, bool count_names) {
  SummaryReport r;
  const Image& image = s.image();
  r.target = image.description();
  r.pid = image.pid();
  if (const Module* exe = image.main_executable()) r.executable = exe->path;
  r.command_line = command_line_in_memory(image);
  for (const ThreadState& t : image.threads()) r.threads.push_back({t.tid, t.name});
  for (const Module& m : image.modules()) r.modules.push_back(module_row(s, m));
  // dpkg reads its whole database to answer (a tenth of a second): beside the heap's walk, not before it.
  std::future<void> hints = std::async(std::launch::async, [&r] { add_install_hints(r.modules); });
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
    r.state_labels = heap.state_labels;
    r.terms = heap.terms;
    r.figures = heap.figures;
    if (count_names) r.typed = typed_share(heap, s.types());
    r.outside_malloc = outside_malloc(s);
    for (const HeapSegment& h : heap.reserved) r.reserved.add(h.end - h.start);
    // Said for the allocators that can keep sites, and for those that have something to say about it.
    if (const Provenance& p = s.provenance(); p.supported || !p.how_to_enable.empty()) r.sites = sites_note(p);
  } catch (const AnalysisError& e) {
    r.heap_error = e.what();  // the process overview is still worth showing
  }
  hints.get();
  return r;
}

}  // namespace heapscope
