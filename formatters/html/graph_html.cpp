// HTML views of `leaks` (groups as a sortable table and a chart) and `retainers` (paths as trees).
#include "formatters/html/html_views.h"
#include "formatters/render.h"
#include "formatters/text/text_util.h"

namespace heapscope {

namespace html {

namespace {

// How many of the largest leak groups the chart shows; the table has them all.
constexpr std::size_t kChartedGroups = 12;

std::string root_label(const RootRef& root) {
  return "<span class=\"node-root\">" + escape(text::root_line(root)) + "</span>";
}

// "0x… (Node, 24 bytes), retains 1.2 KiB, pointer at +0x8 (.next)", as the text output's step lines.
std::string step_label(const PathStep& step, bool is_target) {
  return fmt::format("<span class=\"{}\">{}</span>, <span class=\"retained\">retains {}</span>"
                     "<span class=\"field\">{}</span>",
                     is_target ? "node-target" : "node-block", escape(text::block_line(step.block)),
                     escape(text::bytes(step.retained)), escape(text::pointer_place(step)));
}

// While merging: a node and the key that identifies it among its siblings.
struct KeyedNode {
  std::string key;
  std::string label_html;
  std::vector<KeyedNode> children;
};

KeyedNode& child(std::vector<KeyedNode>& siblings, std::string key, const std::string& label_html) {
  for (KeyedNode& n : siblings)
    if (n.key == key) return n;
  siblings.push_back({std::move(key), label_html, {}});
  return siblings.back();
}

TreeNode unkeyed(const KeyedNode& n) {
  TreeNode out{n.label_html, {}};
  for (const KeyedNode& c : n.children) out.children.push_back(unkeyed(c));
  return out;
}

}  // namespace

TreeNode path_tree_node(const RetainerPath& path) { return merged_path_trees({path}).front(); }

std::vector<TreeNode> merged_path_trees(const std::vector<RetainerPath>& paths) {
  std::vector<KeyedNode> roots;
  for (const RetainerPath& p : paths) {
    KeyedNode* node = &child(roots, text::root_line(p.root) + "|" + p.root.kind, root_label(p.root));
    for (std::size_t i = 0; i < p.steps.size(); ++i) {
      const PathStep& s = p.steps[i];
      // A block is the same node when reached the same way and left through the same pointer.
      const std::string key = fmt::format("{:x}+{}", s.block.address, s.offset ? std::to_string(*s.offset) : "-");
      node = &child(node->children, key, step_label(s, i + 1 == p.steps.size()));
    }
  }
  std::vector<TreeNode> out;
  for (const KeyedNode& n : roots) out.push_back(unkeyed(n));
  return out;
}

void add_sites(Page& page, const HistogramReport& r) {
  const bool estimates = r.sites && !r.sites->exact;
  if (r.sites) page.paragraph(r.sites->sentence);
  Table t("sites");
  t.column("blocks", Table::Kind::number).column("bytes", Table::Kind::number);
  t.column("leaked", Table::Kind::number).column("leaked bytes", Table::Kind::number);
  if (estimates) t.column("est. blocks", Table::Kind::number).column("est. bytes", Table::Kind::number);
  t.column("allocated at");
  for (const HistogramRow& h : r.rows) {
    std::vector<Cell> row{number_cell(h.count), bytes_cell(h.bytes), number_cell(h.leaked_count), bytes_cell(h.leaked_bytes)};
    if (estimates) {
      row.push_back(number_cell(h.estimated_count, fmt::format("{:.0f}", h.estimated_count)));
      row.push_back(bytes_cell(static_cast<std::uint64_t>(h.estimated_bytes)));
    }
    std::string frames;
    if (h.site)
      for (const SiteFrame& f : h.site->frames) frames += (frames.empty() ? "" : " ← ") + f.text;
    row.push_back(text_cell(h.site ? frames : "(no allocation site: not sampled)"));
    t.row(std::move(row));
  }
  page.append(t.html());
}

void add_leaks(Page& page, const LeaksReport& r, int level) {
  page.section("Leaked blocks by type", level);
  if (!r.modules_without_symbols.empty()) page.paragraph(text::missing_symbols_note(r.modules_without_symbols));
  page.paragraph(fmt::format("Leaked: {} in {} blocks (direct {} in {}, indirect {} in {}, in cycles {} in {})",
                             text::bytes(r.leaked.bytes), r.leaked.blocks, text::bytes(r.direct.bytes), r.direct.blocks,
                             text::bytes(r.indirect.bytes), r.indirect.blocks, text::bytes(r.cycle.bytes),
                             r.cycle.blocks));
  if (r.possibly.blocks)
    page.paragraph(fmt::format("Possibly leaked (reachable only through interior pointers): {} in {} blocks",
                               text::bytes(r.possibly.bytes), r.possibly.blocks));
  if (const std::string why = possibly_explanation(r); !why.empty()) page.paragraph(why);
  for (const LeaksReport::IdiomTotal& t : r.held_by_idioms)
    page.paragraph(fmt::format("Reachable through the interior-pointer idiom {} alone: {} in {} blocks",
                               idiom_group_name(t), text::bytes(t.total.bytes), t.total.blocks));
  if (r.collectable)
    page.paragraph(fmt::format("Unreachable in {}'s heap, garbage its next collection frees (not leaks, not in the "
                               "table): {} in {} objects, {} of it in whole pages it gives back to its free pages",
                               r.collectable->collector, text::bytes(r.collectable->total.bytes),
                               r.collectable->total.blocks, text::bytes(r.collectable->whole_page_bytes)));
  page.paragraph(kLeakBytesLegend);
  if (r.groups.empty()) {  // the sentence alone: a table with no rows would say nothing more
    page.paragraph(no_leaks_sentence(r));
    page.warnings(r.warnings);
    return;
  } else {
    std::vector<Bar> bars;
    for (std::size_t i = 0; i < r.groups.size() && i < kChartedGroups; ++i) {
      const LeakGroup& g = r.groups[i];
      // Untyped groups are named by their size already ("unknown (56 bytes)").
      const bool named_by_size = g.type.rfind("unknown (", 0) == 0;
      bars.push_back({named_by_size ? g.type : fmt::format("{} ({} B)", g.type, g.size), static_cast<double>(g.bytes),
                      fmt::format("{} in {}", text::bytes(g.bytes), g.count)});
    }
    page.append(bar_chart(bars, "Leaked bytes of the largest groups"));
  }
  Table groups("leaks.groups");
  groups.column("bytes", Table::Kind::number).column("blocks", Table::Kind::number)
      .column("block size", Table::Kind::number).column("type").column("direct", Table::Kind::number)
      .column("indirect", Table::Kind::number).column("in cycles", Table::Kind::number).column("examples");
  for (const LeakGroup& g : r.groups) {
    std::string examples;
    for (Address a : g.examples) examples += (examples.empty() ? "" : " ") + text::hex(a);
    groups.row({bytes_cell(g.bytes), number_cell(g.count), number_cell(g.size), text_cell(g.type),
                number_cell(g.direct), number_cell(g.indirect), number_cell(g.cycle),
                html_cell("<span class=\"mono\">" + escape(examples) + "</span>", examples)});
  }
  page.append(groups.html());
  page.warnings(r.warnings);
}

void add_retainers(Page& page, const RetainersReport& r, int level) {
  page.section("Retainers", level);
  page.append(fmt::format("<p>Block <code>{}</code>: {}</p>\n", escape(text::block_line(r.target)), escape(r.verdict)));
  if (r.paths.empty())
    page.paragraph(r.depth_limited ? "No path from a root within --max-depth." : "leaked: no path from any root");
  else
    page.paragraph(fmt::format("{} path{} from roots to the block; paths through the same blocks share them.",
                               r.paths.size(), r.paths.size() == 1 ? "" : "s"));
  page.append(tree(merged_path_trees(r.paths), "retainers.paths"));
  page.warnings(r.warnings);
}

}  // namespace html

std::string render_html(const LeaksReport& r) {
  html::Page page("heapscope leaks");
  html::add_leaks(page, r, 2);
  return page.html();
}

std::string render_html(const RetainersReport& r) {
  html::Page page("heapscope retainers of " + text::hex(r.query));
  html::add_retainers(page, r, 2);
  return page.html();
}

}  // namespace heapscope
