// Text renderers of the snapshot reports: saved snapshots, a diff, an evolution table.
#include "formatters/render.h"
#include "formatters/text/snapshot_time.h"
#include "formatters/text/text_util.h"

namespace heapscope {

namespace {

std::string signed_bytes(std::int64_t n) { return text::signed_amount(n, text::bytes); }
std::string signed_count(std::int64_t n) { return fmt::format("{}{}", n > 0 ? "+" : "", n); }

std::string snapshot_line(const SnapshotInfo& s) {
  return fmt::format("{}: {} blocks, {} in use; {}, taken {}", s.name, s.in_use_blocks, text::bytes(s.in_use_bytes),
                     s.target, text::capture_time(s.capture_time_ns));
}

void append_rows(std::string& out, const char* title, const std::vector<DiffRow>& rows, std::uint64_t total) {
  out += fmt::format("\n{} ({} of {}, most growth first):\n", title, rows.size(), total);
  out += fmt::format("  {:>10} {:>8} {:>10} {:>8} {:>11} {:>8}  {}\n", "before", "count", "after", "count", "delta",
                     "count", "name");
  for (const DiffRow& r : rows)
    out += fmt::format("  {:>10} {:>8} {:>10} {:>8} {:>11} {:>8}  {}\n", text::bytes(r.before_bytes), r.before_count,
                       text::bytes(r.after_bytes), r.after_count, signed_bytes(r.delta_bytes),
                       signed_count(r.delta_count), r.name);
}

}  // namespace

std::string render_text(const SnapshotReport& r) {
  std::string out;
  if (r.action == "list") {
    out = r.snapshots.empty() ? "No saved snapshots (save one with `snapshot save NAME`).\n"
                              : fmt::format("{} saved snapshot{}, oldest first:\n", r.snapshots.size(),
                                            r.snapshots.size() == 1 ? "" : "s");
    for (const SnapshotInfo& s : r.snapshots) out += "  " + snapshot_line(s) + "\n";
  } else {
    const char* done = r.action == "save" ? "Saved" : r.action == "load" ? "Loaded" : "Dropped";
    for (const SnapshotInfo& s : r.snapshots) out += fmt::format("{} snapshot {}\n", done, snapshot_line(s));
    if (!r.file.empty()) out += fmt::format("{} {}\n", r.action == "load" ? "from" : "written to", r.file);
  }
  text::append_warnings(out, r.warnings);
  return out;
}

std::string render_text(const DiffReport& r) {
  std::string out = fmt::format("From {}\n  to {}\n", snapshot_line(r.before), snapshot_line(r.after));
  out += fmt::format("In use: {} in {} blocks → {} in {} blocks ({}, {} blocks)\n", text::bytes(r.before.in_use_bytes),
                     r.before.in_use_blocks, text::bytes(r.after.in_use_bytes), r.after.in_use_blocks,
                     signed_bytes(static_cast<std::int64_t>(r.after.in_use_bytes) - static_cast<std::int64_t>(r.before.in_use_bytes)),
                     signed_count(static_cast<std::int64_t>(r.after.in_use_blocks) - static_cast<std::int64_t>(r.before.in_use_blocks)));
  append_rows(out, r.by == "site" ? "By allocation site (estimated)" : "By type", r.types, r.type_count);
  append_rows(out, "By root (retained)", r.roots, r.root_count);
  if (r.addresses_compared) {
    out += fmt::format("\nSame process, compared address by address: {} blocks kept, {} new ({}), {} gone ({})\n",
                       r.kept_blocks, r.new_blocks, text::bytes(r.new_bytes), r.gone_blocks, text::bytes(r.gone_bytes));
    out += fmt::format("  {:>8} {:>10} {:>8} {:>10}  {}\n", "new", "bytes", "gone", "bytes", "type");
    for (const AddressDiffRow& row : r.new_by_type)
      out += fmt::format("  {:>8} {:>10} {:>8} {:>10}  {}\n", row.new_count, text::bytes(row.new_bytes), row.gone_count,
                         text::bytes(row.gone_bytes), row.type);
    if (!r.samples.empty()) out += "\nNew blocks of the types with the largest net growth (new bytes less gone bytes), and what holds "
                                  "them now:\n";
    for (std::size_t i = 0; i < r.samples.size(); ++i) {
      out += fmt::format("  {}. {}\n", i + 1, text::block_line(r.samples[i].block));
      if (r.samples[i].path) text::append_path(out, r.samples[i].path);
      else out += "     no root reaches it (leaked)\n";
    }
  }
  text::append_warnings(out, r.warnings);
  return out;
}

std::string render_text(const EvolutionReport& r) {
  std::string out = fmt::format("{} point{}, oldest first:\n", r.points.size(), r.points.size() == 1 ? "" : "s");
  for (std::size_t p = 0; p < r.points.size(); ++p) out += fmt::format("  [{}] {}\n", p + 1, snapshot_line(r.points[p]));
  const bool sites = r.by == "site";
  out += fmt::format("\nBytes per {} ({} of {}; steady growers first, marked *, then by {}):\n",
                     sites ? "allocation site (estimated)" : "type", r.series.size(), r.type_count,
                     r.by == "growth" || sites ? "growth" : "bytes at the last point");
  out += "  ";
  for (std::size_t p = 0; p < r.points.size(); ++p) out += fmt::format("{:>10} ", fmt::format("[{}]", p + 1));
  out += fmt::format("{:>11}  {}\n", "growth", sites ? "allocated at" : "type");
  for (const EvolutionSeries& s : r.series) {
    out += s.steady ? "* " : "  ";
    for (std::uint64_t b : s.bytes) out += fmt::format("{:>10} ", text::bytes(b));
    out += fmt::format("{:>11}  {} ({} → {} blocks)\n", signed_bytes(s.growth_bytes), s.type,
                       s.counts.empty() ? 0 : s.counts.front(), s.counts.empty() ? 0 : s.counts.back());
  }
  text::append_warnings(out, r.warnings);
  return out;
}

}  // namespace heapscope
