// `retainers --format dot`: the retainer paths as one Graphviz digraph. A root or block on several paths is
// one node, so shared prefixes merge; roots are ellipses, blocks boxes, the target outlined in red; edges
// carry the field or offset holding the pointer.
#include <fmt/format.h>

#include <map>
#include <set>
#include <tuple>

#include "formatters/render.h"
#include "formatters/text/text_util.h"

namespace heapscope {

namespace {

// The inside of a DOT double-quoted string: quotes and backslashes escaped, line breaks as \n (which
// Graphviz reads as a centred line break in a label).
std::string dot_quoted(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    if (c == '\r') continue;
    out += c;
  }
  return out + "\"";
}

std::string block_label(const BlockRef& b, std::uint64_t retained) {
  return fmt::format("{}\n{}\n{} bytes, retains {}", text::hex(b.address), b.type, b.size, text::bytes(retained));
}

std::string root_label(const RootRef& r) {
  return r.label + (r.address ? "\n" + text::hex(r.address) : std::string());
}

// "+0x88 [17]": where in a block the pointer to the next block sits.
std::string pointer_label(const PathStep& s) {
  if (!s.offset) return {};
  return fmt::format("+0x{:x}", *s.offset) + (s.field.empty() ? std::string() : " " + s.field);
}

class DotGraph {
 public:
  std::string root(const RootRef& r) {
    const std::string key = r.kind + "|" + text::root_line(r);
    auto [it, added] = roots_.try_emplace(key, fmt::format("root{}", roots_.size()));
    if (added)
      nodes_ += fmt::format("  {} [shape=ellipse, style=filled, fillcolor=\"#fde6c8\", label={}];\n", it->second,
                            dot_quoted(root_label(r)));
    return it->second;
  }
  std::string block(const BlockRef& b, std::uint64_t retained, bool is_target) {
    auto [it, added] = blocks_.try_emplace(b.address, fmt::format("block{}", blocks_.size()));
    if (added)
      nodes_ += fmt::format("  {} [shape=box, style=\"rounded,filled\", fillcolor=\"#dfe9f5\"{}, label={}];\n",
                            it->second, is_target ? ", color=\"#a01515\", penwidth=2.5" : "",
                            dot_quoted(block_label(b, retained)));
    return it->second;
  }
  void edge(const std::string& from, const std::string& to, const std::string& label) {
    if (!edges_.emplace(from, to, label).second) return;
    edge_lines_ += fmt::format("  {} -> {}{};\n", from, to,
                               label.empty() ? std::string() : " [label=" + dot_quoted(label) + "]");
  }
  std::string text(const std::string& title) const {
    return "digraph retainers {\n  graph [rankdir=LR, labelloc=t, fontname=\"Helvetica\", label=" + dot_quoted(title) +
           "];\n  node [fontname=\"Helvetica\", fontsize=10];\n  edge [fontname=\"Helvetica\", fontsize=9];\n" +
           nodes_ + edge_lines_ + "}\n";
  }

 private:
  std::map<std::string, std::string> roots_;
  std::map<Address, std::string> blocks_;
  std::set<std::tuple<std::string, std::string, std::string>> edges_;
  std::string nodes_, edge_lines_;
};

}  // namespace

std::string render_dot(const RetainersReport& r) {
  DotGraph graph;
  for (const RetainerPath& p : r.paths) {
    std::string from = graph.root(p.root);
    std::string label = p.root.field;  // the member of the root's variable holding the pointer
    for (const PathStep& s : p.steps) {
      const std::string to = graph.block(s.block, s.retained, s.block.address == r.target.address);
      graph.edge(from, to, label);
      from = to;
      label = pointer_label(s);
    }
  }
  if (r.paths.empty()) graph.block(r.target, 0, true);  // a leaked block: the target alone
  std::string title = fmt::format("Retainers of {}: {}", text::block_line(r.target), r.verdict);
  if (r.paths.empty()) title += r.depth_limited ? " (no path within --max-depth)" : " (no path from any root)";
  return graph.text(title);
}

}  // namespace heapscope
