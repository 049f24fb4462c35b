// HTML of `report`: one page, a part per section (summary, leaks, top, roots, fragmentation, evolution) with the part's own view
// below it, and a table of contents.
#include "formatters/html/html_views.h"
#include "formatters/render.h"

namespace heapscope {

std::string render_html(const ReportBundle& r) {
  // Findings first (leaks, suspects, growth), then where the memory is, then the process's details.
  html::Page page("heapscope report: " + r.summary.target);
  page.section("Leaks");
  if (r.leaks) html::add_leaks(page, *r.leaks, 3);
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
