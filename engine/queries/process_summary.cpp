#include "queries/process_summary.h"

namespace heapscope {

namespace {

std::string symbol_source(const Session& s, const Module& m) {
  if (m.file_on_disk.empty()) return "no file";
  const ModuleSymbols* syms = s.symbols().symbols_for(m);
  if (!syms) return "unreadable";
  if (!syms->debug_file().empty()) return "debug file " + syms->debug_file();
  return syms->has_local_symbols() ? "symtab" : "dynsym only";
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

}  // namespace

SummaryReport build_summary_report(Session& s) {
  SummaryReport r;
  const Image& image = s.image();
  r.target = image.description();
  r.pid = image.pid();
  if (const Module* exe = image.main_executable()) r.executable = exe->path;
  for (const ThreadState& t : image.threads()) r.threads.push_back({t.tid, t.name});
  for (const Module& m : image.modules()) r.modules.push_back({m.path, m.load_bias, m.build_id, symbol_source(s, m)});
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
  } catch (const AnalysisError& e) {
    r.heap_error = e.what();  // the process overview is still worth showing
  }
  return r;
}

}  // namespace heapscope
