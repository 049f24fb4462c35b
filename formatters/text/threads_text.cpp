// Text renderer of the threads report.
#include "formatters/render.h"
#include "formatters/text/text_util.h"

namespace heapscope {

namespace {

std::string thread_name(const LiveThreadRow& t) { return t.name.empty() ? std::string("-") : t.name; }

void append_live_threads(std::string& out, const std::vector<LiveThreadRow>& threads) {
  out += fmt::format("Live threads ({}), bytes each keeps alive alone (the whole thread, then each part alone):\n",
                     threads.size());
  out += fmt::format("{:>8}  {:<16} {:>10} {:>10} {:>10} {:>10} {:>10}  stack mapping\n", "tid", "name", "thread",
                     "stack", "registers", "TLS", "mapped");
  for (const LiveThreadRow& t : threads) {
    const std::string mapping =
        t.stack_end ? fmt::format("{}-{}", text::hex(t.stack_start), text::hex(t.stack_end)) : std::string("-");
    out += fmt::format("{:>8}  {:<16} {:>10} {:>10} {:>10} {:>10} {:>10}  {}\n", t.tid, thread_name(t),
                       text::bytes(t.retained), text::bytes(t.stack_retained), text::bytes(t.registers_retained), text::bytes(t.tls_retained),
                       text::bytes(t.stack_end - t.stack_start), mapping);
    for (const FrameRetention& f : t.frames) out += fmt::format("{:>10}  {}\n", text::bytes(f.retained), f.label);
  }
}

std::string holder_name(const HandleHolder& h) {
  if (h.block) return fmt::format("{} {} ({} bytes)", h.block->type, text::hex(h.block->address), h.block->size);
  return h.root ? h.root->label : std::string();
}

std::string path_text(const RetainerPath& p) {
  std::string out = p.root.label;
  for (const PathStep& s : p.steps) out += fmt::format(" → {} {}", s.block.type, text::hex(s.block.address));
  return out;
}

void append_holders(std::string& out, const ThreadsReport& r) {
  if (!r.holder_groups.empty()) out += "\nWhat holds their pthread_t:\n";
  for (const HandleHolderGroup& g : r.holder_groups)
    out += fmt::format("  {} ({}×) holds {} pthread_t of exited threads ({} stack{}, {} mapped)\n", g.holder,
                       g.holders, g.handles, g.handles, g.handles == 1 ? "" : "s", text::bytes(g.stack_bytes));
  for (const HandleHolder& h : r.holders) {
    out += fmt::format("  {}: {} pthread_t\n", holder_name(h), h.handles.size());
    if (h.path) out += fmt::format("      retained via {}\n", path_text(*h.path));
  }
  if (r.unheld_handles)
    out += fmt::format("  {} exited threads' pthread_t are held nowhere (lost: they can never be joined)\n",
                       r.unheld_handles);
}

}  // namespace

std::string render_text(const ThreadsReport& r) {
  std::string out;
  append_live_threads(out, r.threads);
  out += fmt::format("\nExited threads glibc still holds: {} ({} of stacks mapped; their descriptors retain {})\n",
                     r.exited.size(), text::bytes(r.exited_stack_bytes), text::bytes(r.exited_descriptor_retained));
  for (const ExitedThreadRow& t : r.exited)
    out += fmt::format("  pthread_t {}  stack {}-{} ({}){}  descriptor retains {}\n", text::hex(t.pthread),
                       text::hex(t.stack_start), text::hex(t.stack_end), text::bytes(t.stack_end - t.stack_start),
                       t.in_stack_cache ? " in glibc's stack cache" : "", text::bytes(t.descriptor_retained));
  append_holders(out, r);
  text::append_warnings(out, r.warnings);
  return out;
}

}  // namespace heapscope
