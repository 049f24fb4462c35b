#include "queries/heap_snapshot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "types/type_groups.h"
#include "session/session.h"
#include "base/phase_timer.h"

namespace heapscope {

namespace {

// A root's name without what differs between two runs of one program (thread ids, addresses of
// anonymous mappings, frame depths), so that the same root matches in cores of separate runs. Roots
// that fold into one label (a recursive function's frames) are summed.
std::string stable_root_label(const RootNode& n, const std::vector<std::vector<Frame>>& frames,
                              const std::vector<InterpreterFrame>& interpreter_frames) {
  const std::string thread = n.thread == RootNode::kNoThread ? "a thread" : fmt::format("thread {}", n.thread + 1);
  if (n.owner_kind == OwnerKind::thread && n.level == RootNode::Level::owner) return thread;
  switch (n.kind) {
    case RootKind::global: return n.label;
    case RootKind::registers:
    case RootKind::tls: return thread_root_label(n.kind, thread);
    case RootKind::dynamic_tls: {  // the thread's dynamic TLS, or one module's block in it
      const std::size_t module = n.label.find(", module id");
      return thread_root_label(n.kind, thread) + (module == std::string::npos ? "" : n.label.substr(module));
    }
    case RootKind::stack:
      if (n.frame == RootNode::kNoFrame || n.thread >= frames.size() || n.frame >= frames[n.thread].size())
        return thread_root_label(n.kind, thread);
      return frame_root_label(thread, n.frame, frames[n.thread][n.frame], n.variable, LabelDetail::stable);
    case RootKind::interpreter_frame:
      if (n.frame >= interpreter_frames.size()) return n.label;
      return interpreter_frame_label(thread, interpreter_frame_text(interpreter_frames[n.frame], LabelDetail::stable),
                                     n.variable);
    case RootKind::anonymous: return "anonymous mappings";
    case RootKind::exited_thread: return "descriptors of exited threads";
    default: return n.label;  // finalizers: named by handler and variable
  }
}

std::vector<SnapshotRootTotal> root_totals(Session& s) {
  const Retention& r = s.retention();
  const auto& frames = s.frames();
  std::vector<SnapshotRootTotal> out;
  std::unordered_map<std::string, std::size_t> by_label;
  for (std::size_t i = 0; i < r.root_nodes().size(); ++i) {
    const RootNode& n = r.root_nodes()[i];
    const std::uint32_t node = r.root_node_id(i);
    if (n.level == RootNode::Level::kind || !r.reachable(node) || r.retained_blocks(node) == 0) continue;
    std::string label = stable_root_label(n, frames, s.heap().interpreter_frames);
    auto [it, fresh] = by_label.try_emplace(label, out.size());
    const bool part = n.level == RootNode::Level::part;
    if (fresh) out.push_back({std::move(label), part ? root_kind_name(n.kind) : owner_kind_name(n.owner_kind), 0, 0});
    out[it->second].blocks += r.retained_blocks(node);
    out[it->second].bytes += r.retained_bytes(node);
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const SnapshotRootTotal& a, const SnapshotRootTotal& b) { return a.bytes > b.bytes; });
  return out;
}

// A site's name in every core of the program: its frames' functions and lines, not their addresses.
std::string stable_site_label(const AllocationSite& site) {
  std::string out;
  for (const Frame& f : site.frames) out += (out.empty() ? "" : " ← ") + f.describe();
  return out.empty() ? site.label() : out;
}

std::vector<SnapshotTypeTotal> site_totals(const Provenance& p) {
  std::vector<SnapshotTypeTotal> out;
  std::unordered_map<std::string, std::size_t> by_label;
  for (const AllocationSite& site : p.sites) {
    auto [it, fresh] = by_label.try_emplace(stable_site_label(site), out.size());
    if (fresh) out.push_back({it->first, 0, 0});
    out[it->second].count += static_cast<std::uint64_t>(std::llround(site.estimated_blocks));
    out[it->second].bytes += static_cast<std::uint64_t>(std::llround(site.estimated_bytes));
  }
  return out;
}

}  // namespace

HeapSnapshot take_snapshot(Session& s, std::string name) {
  const HeapModel& heap = s.heap();
  const BlockTypes& types = s.types();
  std::vector<SnapshotRootTotal> roots = root_totals(s);
  PhaseTimer timer("snapshot");
  HeapSnapshot out;
  out.name = std::move(name);
  out.target = s.image().description();
  out.pid = s.image().pid();
  out.capture_time_ns = s.image().capture_time_ns();
  out.warnings = s.warnings();
  out.roots = std::move(roots);

  TypeGroups groups(heap, types);
  std::vector<std::uint32_t> snapshot_type;  // per group: index into out.types
  for (BlockId b = 0; b < heap.blocks.size(); ++b) {
    const Block& block = heap.blocks[b];
    if (!is_allocated(block.state)) continue;
    const std::uint32_t g = groups.of(b);
    if (g >= snapshot_type.size()) snapshot_type.resize(g + 1, TypeGroups::kNone);
    if (snapshot_type[g] == TypeGroups::kNone) {
      snapshot_type[g] = static_cast<std::uint32_t>(out.types.size());
      out.types.push_back({groups.name(g), 0, 0});
    }
    const std::uint32_t t = snapshot_type[g];
    ++out.types[t].count;
    out.types[t].bytes += block.usable_size();
    ++out.in_use_blocks;
    out.in_use_bytes += block.usable_size();
    out.blocks.push_back(snapshot_block(block, t));
  }
  // The heap model keeps blocks in address order already; sorting again costs nothing then and keeps the
  // same-address comparison correct whatever a future allocator walker does.
  if (!std::is_sorted(out.blocks.begin(), out.blocks.end(),
                      [](const SnapshotBlock& a, const SnapshotBlock& b) { return a.address < b.address; }))
    std::sort(out.blocks.begin(), out.blocks.end(),
              [](const SnapshotBlock& a, const SnapshotBlock& b) { return a.address < b.address; });
  out.blocks.shrink_to_fit();
  out.sites = site_totals(s.provenance());
  return out;
}

void require_sites(const HeapSnapshot& snapshot) {
  if (snapshot.sites.empty())
    throw AnalysisError("no allocation sites in " + snapshot.name +
                        ": its allocator did not sample the blocks (summary says how to turn sampling on)");
}

}  // namespace heapscope
