// Text renderer of the finalizers report.
#include "formatters/render.h"
#include "formatters/text/retention_parts.h"

namespace heapscope {

namespace {

// "thread 1 (tid 42)"-less: the tid, an exited thread's pthread_t, or "-" for process-wide handlers.
std::string thread_cell(const FinalizerRow& f) {
  if (f.tid) return fmt::format("tid {}", f.tid);
  if (f.exited_thread) return fmt::format("exited {}", text::hex(f.exited_thread));
  return "-";
}

std::string function_cell(const FinalizerRow& f) {
  return f.module.empty() ? f.function : fmt::format("{} in {}", f.function, f.module);
}

std::string object_cell(const FinalizerRow& f) {
  if (!f.variable.empty()) return f.variable;
  if (f.key) return fmt::format("key {} data {}", *f.key, text::hex(f.object));
  return f.object ? text::hex(f.object) : std::string("-");
}

}  // namespace

std::string render_text(const FinalizersReport& r) {
  std::string out = text::heap_line(r.heap);
  out += fmt::format("Finalizer roots keep alive: {} ({:.1f}% of the heap in use) in {}\n\n", text::bytes(r.total.bytes),
                     r.total.percent, text::blocks(r.total.blocks));
  out += "Registrations by kind:\n";
  for (const FinalizerKindTotal& k : r.kinds)
    if (k.registrations) out += fmt::format("  {:<12} {:>5}  retaining {}\n", k.kind, k.registrations, text::bytes(k.retained_bytes));
  out += "\nBy function (what each registration alone keeps alive, summed):\n";
  std::size_t idle = 0;  // handlers that keep nothing alive: counted, not listed
  for (const FinalizerFunctionGroup& g : r.functions) {
    if (g.retained_bytes == 0) {
      ++idle;
      continue;
    }
    out += fmt::format("  {} × {} retains {} in {} ({})\n", g.module.empty() ? g.function : fmt::format("{} in {}", g.function, g.module),
                       g.registrations, text::bytes(g.retained_bytes), text::blocks(g.retained_blocks), g.kind);
  }
  if (idle) out += fmt::format("  and {} more handler{} keeping nothing alive\n", idle, idle == 1 ? "" : "s");
  out += r.registrations.size() < r.registrations_total
             ? fmt::format("\nRegistrations ({} of {}; -n N or --all for more), largest retained first:\n",
                           r.registrations.size(), r.registrations_total)
             : fmt::format("\nRegistrations ({}), largest retained first:\n", r.registrations.size());
  out += fmt::format("  {:>8} {:>7} {:>9}  {:<11} {:<16} {:<20} function\n", "retained", "%", "blocks", "kind", "thread",
                     "object");
  for (const FinalizerRow& f : r.registrations)
    out += fmt::format("  {}  {:<11} {:<16} {:<20} {}\n", text::retained_cells(f.retained), f.kind, thread_cell(f),
                       object_cell(f), function_cell(f));
  text::append_warnings(out, r.warnings);
  return out;
}

}  // namespace heapscope
