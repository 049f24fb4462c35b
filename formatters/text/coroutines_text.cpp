// Text renderer of the coroutines report.
#include "formatters/render.h"
#include "formatters/text/text_util.h"

namespace heapscope {

namespace {

void append_functions(std::string& out, const CoroutinesReport& r) {
  out += fmt::format("Coroutine frames: {} ({})\n", r.total_frames, text::bytes(r.total_bytes));
  if (r.functions.empty()) return;
  out += fmt::format("{:>8} {:>10} {:>7}  {}\n", "frames", "bytes", "sizeof", "coroutine");
  for (const CoroutineFunctionRow& f : r.functions) {
    const std::string size = f.frame_size ? std::to_string(f.frame_size) : std::string("?");
    std::string where = f.source.empty() ? f.module : f.source;
    out += fmt::format("{:>8} {:>10} {:>7}  {}  ({})\n", f.frames, text::bytes(f.bytes), size, f.function, where);
    if (!f.promise_type.empty()) out += fmt::format("{:>28}promise {}\n", "", f.promise_type);
    for (const auto& [point, count] : f.suspend_points)
      out += fmt::format("{:>28}{} at {}\n", "", count, point);
  }
}

void append_stacks(std::string& out, const CoroutinesReport& r) {
  out += fmt::format("\nAsync stacks ({} shown), outermost awaiter first:\n", r.stacks.size());
  for (const AsyncStack& s : r.stacks) {
    out += fmt::format("  {}× {} frames deep, {}; outermost {}, innermost {}\n", s.count, s.depth, text::bytes(s.bytes),
                       text::hex(s.outermost), text::hex(s.innermost));
    for (const AsyncStackFrame& f : s.frames) {
      const std::string repeat = f.repeat > 1 ? fmt::format(" ×{}", f.repeat) : std::string();
      out += fmt::format("      {} at {}{}\n", f.function, f.suspend_point, repeat);
    }
    out += s.leaked ? "      leaked: no root reaches the outermost frame\n"
                    : fmt::format("      held by {}\n", s.held_by);
  }
}

}  // namespace

std::string render_text(const CoroutinesReport& r) {
  std::string out;
  append_functions(out, r);
  if (r.with_stacks) append_stacks(out, r);
  text::append_warnings(out, r.warnings);
  return out;
}

}  // namespace heapscope
