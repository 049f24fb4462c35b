// Text of `report`: each part as its own command prints it, under a heading.
#include "formatters/render.h"
#include "formatters/text/text_util.h"

namespace heapscope {

namespace {

template <typename Part>
void append_part(std::string& out, const char* heading, const std::optional<Part>& part) {
  out += fmt::format("\n===== {} =====\n\n", heading);
  out += part ? render_text(*part) : std::string("(left out: see the warnings of the summary above)\n");
}

}  // namespace

std::string render_text(const ReportBundle& r) {
  std::string out = "===== summary =====\n\n" + render_text(r.summary);
  append_part(out, "leaks", r.leaks);
  append_part(out, "top", r.top);
  append_part(out, "roots", r.roots);
  append_part(out, "fragmentation", r.fragmentation);
  if (r.evolution) append_part(out, "evolution", r.evolution);
  if (r.sites) append_part(out, "where allocated", r.sites);
  if (!r.leaks) text::append_warnings(out, r.warnings);  // why the parts are missing
  return out;
}

}  // namespace heapscope
