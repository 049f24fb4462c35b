// HTML of `report`: one page that opens with its findings (leaks, the largest retention suspect, growth,
// what "possibly leaked" means when much is), then a part per section (leaks, top, evolution, roots,
// fragmentation, summary) with the part's own view, and a table of contents.
#include <algorithm>

#include "formatters/html/html_views.h"
#include "formatters/render.h"
#include "formatters/text/retention_parts.h"
#include "formatters/text/snapshot_time.h"

namespace heapscope {

namespace {

std::string leaks_finding(const LeaksReport& r) {
  if (r.groups.empty()) return no_leaks_sentence(r);
  const LeakGroup& largest = r.groups.front();
  return fmt::format("Leaks: {} in {}; the largest group: {} in {} of {} bytes, {}.", text::bytes(r.leaked.bytes),
                     text::blocks(r.leaked.blocks), text::bytes(largest.bytes), text::blocks(largest.count), largest.size,
                     largest.type);
}

std::string suspect_finding(const TopReport& r) {
  if (r.suspects.empty())
    return "No retention suspect: no root or block retains 10% of the heap, and no type piles up under one.";
  return "Largest retention suspect: " + text::suspect_headline(r.suspects.front()) + ".";
}

// Empty without an earlier point to grow from.
std::string growth_finding(const EvolutionReport& r) {
  if (r.points.size() < 2) return {};
  const SnapshotInfo &first = r.points.front(), &last = r.points.back();
  std::string out = fmt::format(
      "Growth over {} cores: in use {} → {} ({}).", r.points.size(), text::bytes(first.in_use_bytes),
      text::bytes(last.in_use_bytes),
      text::signed_amount(static_cast<std::int64_t>(last.in_use_bytes) - static_cast<std::int64_t>(first.in_use_bytes),
                          text::bytes));
  const auto most = std::max_element(r.series.begin(), r.series.end(), [](const EvolutionSeries& a, const EvolutionSeries& b) {
    return a.growth_bytes < b.growth_bytes;
  });
  if (most != r.series.end() && most->growth_bytes > 0)
    out += fmt::format(" Grew most: {} ({}{}).", most->type, text::signed_amount(most->growth_bytes, text::bytes),
                       most->steady ? ", at every step" : "");
  return out;
}

// Empty unless the possibly leaked blocks are a large share of the in-use heap (possibly_explanation).
std::string possibly_finding(const LeaksReport& r) {
  const std::string why = possibly_explanation(r);
  if (why.empty()) return {};
  return fmt::format("Possibly leaked: {} ({:.1f}% of the in-use heap) in {}. {}", text::bytes(r.possibly.bytes),
                     100.0 * static_cast<double>(r.possibly.bytes) / static_cast<double>(r.in_use.bytes),
                     text::blocks(r.possibly.blocks), why);
}

// The report's first lines: what it found, before the tables that show it in full.
std::string findings_html(const ReportBundle& r) {
  std::vector<std::string> findings;
  if (r.leaks) findings.push_back(leaks_finding(*r.leaks));
  if (r.top) findings.push_back(suspect_finding(*r.top));
  if (r.evolution) findings.push_back(growth_finding(*r.evolution));
  if (r.leaks) findings.push_back(possibly_finding(*r.leaks));
  std::string out = "<div class=\"findings\" data-findings=\"report\"><strong>Findings</strong><ul>\n";
  for (const std::string& f : findings)
    if (!f.empty()) out += "<li>" + html::escape(f) + "</li>\n";
  if (!r.summary.heap_error.empty()) out += "<li>" + html::escape("The heap was not walked: " + r.summary.heap_error) + "</li>\n";
  return out + "</ul></div>\n";
}

}  // namespace

std::string render_html(const ReportBundle& r) {
  // Findings first (leaks, suspects, growth), then where the memory is, then the process's details.
  html::Page page("heapscope report: " + r.summary.target);
  page.append(findings_html(r));
  page.section("Leaks");
  if (r.leaks) html::add_leaks(page, *r.leaks, 3);
  if (r.sites) {
    page.section("Where allocated");
    html::add_sites(page, *r.sites);
  }
  page.section("Top");
  if (r.top) html::add_top(page, *r.top, 3);
  if (r.evolution) {
    page.section("Evolution");
    html::add_evolution(page, *r.evolution, 3);
  }
  page.section("Roots");
  if (r.roots) html::add_roots(page, *r.roots, 3);
  page.section("Fragmentation");
  if (r.fragmentation) html::add_fragmentation(page, *r.fragmentation, 3);
  page.section("Summary");
  html::add_summary(page, r.summary, 3);
  if (!r.leaks) {
    page.section("Warnings");
    page.warnings(r.warnings);
  }
  return page.html();
}

}  // namespace heapscope
