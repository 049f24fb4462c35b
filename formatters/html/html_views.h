// The HTML views of the reports, as sections of a Page: render_html of one report is a page with its own
// sections; the report bundle (`report`) puts several views on one page under a heading each.
// `level` is the heading level of the view's sections (2 on a page of its own, 3 under a bundle's part).
#pragma once

#include "formatters/html/html_page.h"
#include "reports/report.h"

namespace heapscope::html {

void add_summary(Page& page, const SummaryReport& r, int level);
void add_leaks(Page& page, const LeaksReport& r, int level);
void add_sites(Page& page, const HistogramReport& r);  // histogram --by site: blocks by allocation site
void add_top(Page& page, const TopReport& r, int level);
void add_roots(Page& page, const RootsReport& r, int level);
void add_retainers(Page& page, const RetainersReport& r, int level);
void add_fragmentation(Page& page, const FragmentationReport& r, int level);
void add_diff(Page& page, const DiffReport& r, int level);
void add_evolution(Page& page, const EvolutionReport& r, int level);

// Retainer paths as a tree: one node per root, then per block down to the target; paths sharing a prefix
// share its nodes. Each node reads like its line in the text output.
TreeNode path_tree_node(const RetainerPath& path);
std::vector<TreeNode> merged_path_trees(const std::vector<RetainerPath>& paths);

}  // namespace heapscope::html
