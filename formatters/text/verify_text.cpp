// Text renderer of the verify report.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "formatters/render.h"
#include "formatters/text/text_util.h"

namespace heapscope {

namespace {

std::string plural(std::uint64_t n, const char* one, const char* many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

std::string checked_line(const HeapCheckCounts& c) {
  return fmt::format("{}, {}, {}; list entries: {} in bins, {} in fastbins, {} in {}", plural(c.arenas, "arena", "arenas"),
                     plural(c.heaps, "heap", "heaps"), plural(c.chunks, "chunk", "chunks"), c.bin_entries,
                     c.fastbin_entries, c.tcache_entries, plural(c.tcaches, "thread cache", "thread caches"));
}

void append_finding(std::string& out, std::size_t number, const HeapFinding& f, const std::string& object) {
  out += fmt::format("{:>3}. {} at {}\n", number, f.kind, f.chunk ? object + " " + text::hex(f.chunk) : "the list head");
  // "in: heap 0x…, arena 0x…" for damage in a heap; "in: <list>; heap 0x…, arena 0x…" for a list entry.
  std::vector<std::string> places;
  if (f.heap) places.push_back("heap " + text::hex(f.heap));
  if (f.arena) places.push_back("arena " + text::hex(f.arena));
  const std::string place = fmt::format("{}", fmt::join(places, ", "));
  if (f.where == "heap") out += "     in:       " + (place.empty() ? f.where : place) + "\n";
  else out += "     in:       " + f.where + (place.empty() ? "" : "; " + place) + "\n";
  out += fmt::format("     expected: {}\n     found:    {}\n", f.expected, f.found);
  out += fmt::format("     last good {}: {}\n", object, f.last_good ? text::hex(f.last_good) : "none");
  out += fmt::format("     affects:  {}\n", f.affects);
}

}  // namespace

std::string render_text(const VerifyReport& r) {
  const HeapVerification& v = r.result;
  const std::uint64_t problems = v.findings.size() + v.findings_dropped;
  std::string out = fmt::format("Heap verification ({} {}): {}\n", r.allocator, r.version.empty() ? "unknown" : r.version,
                                problems == 0 ? "no problems found" : plural(problems, "problem", "problems"));
  if (v.counts_in_glibc_words) out += "Checked: " + checked_line(v.checked) + "\n";
  for (const std::string& c : v.checked_in_own_words) out += "Checked: " + c + "\n";
  for (const std::string& n : v.notes) out += "Not checked: " + n + "\n";
  if (!v.findings.empty()) out += "\n";
  for (std::size_t i = 0; i < v.findings.size(); ++i) append_finding(out, i + 1, v.findings[i], v.object_word);
  if (v.findings_dropped) out += fmt::format("  … and {} more not listed\n", v.findings_dropped);
  text::append_warnings(out, r.warnings);
  return out;
}

}  // namespace heapscope
