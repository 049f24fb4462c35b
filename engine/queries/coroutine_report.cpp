#include "queries/coroutine_report.h"

#include <algorithm>
#include <limits>
#include <map>

#include "queries/retention_paths.h"

namespace heapscope {

namespace {

constexpr std::size_t kMaxStacks = 100000;  // root-to-leaf paths walked; fan-out beyond this is cut, with a warning

std::uint64_t frame_bytes(Session& s, const CoroutineFrame& f) { return s.heap().blocks[f.block].usable_size(); }

std::vector<CoroutineFunctionRow> function_rows(Session& s, const CoroutineFrames& c) {
  std::vector<CoroutineFunctionRow> rows(c.functions.size());
  std::vector<std::map<std::string, std::uint64_t>> points(c.functions.size());
  for (std::size_t i = 0; i < c.functions.size(); ++i) {
    const CoroutineFunction& f = c.functions[i];
    rows[i].function = f.name;
    rows[i].module = f.module;
    rows[i].source = f.source.describe();
    if (f.layout) {
      rows[i].frame_size = f.layout->frame_size;
      if (f.layout->promise) rows[i].promise_type = f.layout->promise->type;
    }
  }
  for (const CoroutineFrame& frame : c.frames) {
    rows[frame.function].frames += 1;
    rows[frame.function].bytes += frame_bytes(s, frame);
    points[frame.function][c.suspend_point(frame)] += 1;
  }
  for (std::size_t i = 0; i < rows.size(); ++i) {
    rows[i].suspend_points.assign(points[i].begin(), points[i].end());
    std::stable_sort(rows[i].suspend_points.begin(), rows[i].suspend_points.end(),
                     [](auto& a, auto& b) { return a.second > b.second; });
  }
  std::erase_if(rows, [](const CoroutineFunctionRow& r) { return r.frames == 0; });
  std::stable_sort(rows.begin(), rows.end(), [](auto& a, auto& b) { return a.bytes > b.bytes; });
  return rows;
}

// Every path from a frame nobody awaits down to a frame that awaits nothing, as frame indices.
std::vector<std::vector<std::uint32_t>> async_paths(const CoroutineFrames& c, std::vector<std::string>& warnings) {
  std::vector<std::vector<std::uint32_t>> awaited(c.frames.size());
  for (std::uint32_t i = 0; i < c.frames.size(); ++i)
    if (c.frames[i].awaiter != CoroutineFrame::kNone) awaited[c.frames[i].awaiter].push_back(i);
  std::vector<std::vector<std::uint32_t>> paths;
  std::vector<bool> on_path(c.frames.size(), false);
  for (std::uint32_t outermost = 0; outermost < c.frames.size(); ++outermost) {
    if (c.frames[outermost].awaiter != CoroutineFrame::kNone) continue;
    // Depth-first with an explicit stack: (frame, index of the next awaited frame to visit).
    std::vector<std::pair<std::uint32_t, std::size_t>> walk{{outermost, 0}};
    std::vector<std::uint32_t> path{outermost};
    on_path[outermost] = true;
    while (!walk.empty()) {
      auto& [frame, next] = walk.back();
      if (next == 0 && awaited[frame].empty()) {
        if (paths.size() == kMaxStacks) {
          warnings.push_back("more async stacks than can be listed; the rest are left out");
          return paths;
        }
        paths.push_back(path);
      }
      if (next < awaited[frame].size() && !on_path[awaited[frame][next]]) {
        const std::uint32_t child = awaited[frame][next++];
        on_path[child] = true;
        path.push_back(child);
        walk.push_back({child, 0});
        continue;
      }
      if (next < awaited[frame].size()) {
        ++next;  // a cycle of continuations: not followed again
        continue;
      }
      on_path[frame] = false;
      path.pop_back();
      walk.pop_back();
    }
  }
  return paths;
}

// The path's frames, runs of the same function at the same suspend point folded into one.
std::vector<AsyncStackFrame> fold(const CoroutineFrames& c, const std::vector<std::uint32_t>& path) {
  std::vector<AsyncStackFrame> out;
  for (std::uint32_t i : path) {
    const CoroutineFrame& frame = c.frames[i];
    AsyncStackFrame f{c.functions[frame.function].name, c.suspend_point(frame), 1};
    if (!out.empty() && out.back().function == f.function && out.back().suspend_point == f.suspend_point)
      ++out.back().repeat;
    else
      out.push_back(std::move(f));
  }
  return out;
}

std::string stack_key(const std::vector<AsyncStackFrame>& frames) {
  std::string key;
  for (const AsyncStackFrame& f : frames) key += f.function + '\x1f' + f.suspend_point + '\x1f' + std::to_string(f.repeat) + '\x1e';
  return key;
}

void name_holder(Session& s, const CoroutineFrames& c, AsyncStack& stack) {
  // Frames are in block order, so by address.
  const auto outermost = std::lower_bound(c.frames.begin(), c.frames.end(), stack.outermost,
                                          [](const CoroutineFrame& f, Address a) { return f.address < a; });
  if (outermost == c.frames.end() || outermost->address != stack.outermost) return;
  const std::optional<RetainerPath> path = shortest_retainer_path(s, outermost->block);
  stack.leaked = !path;
  if (path) stack.held_by = path->root.label;
}

std::vector<AsyncStack> async_stacks(Session& s, const CoroutineFrames& c, std::size_t limit,
                                     std::vector<std::string>& warnings) {
  std::map<std::string, AsyncStack> by_shape;
  for (const std::vector<std::uint32_t>& path : async_paths(c, warnings)) {
    std::vector<AsyncStackFrame> frames = fold(c, path);
    AsyncStack& stack = by_shape[stack_key(frames)];
    if (stack.count++ == 0) {
      stack.frames = std::move(frames);
      stack.depth = path.size();
      stack.outermost = c.frames[path.front()].address;
      stack.innermost = c.frames[path.back()].address;
    }
    for (std::uint32_t i : path) stack.bytes += frame_bytes(s, c.frames[i]);
  }
  std::vector<AsyncStack> stacks;
  for (auto& [key, stack] : by_shape) stacks.push_back(std::move(stack));
  std::stable_sort(stacks.begin(), stacks.end(), [](auto& a, auto& b) { return a.bytes > b.bytes; });
  if (stacks.size() > limit) stacks.resize(limit);
  for (AsyncStack& stack : stacks) name_holder(s, c, stack);
  return stacks;
}

}  // namespace

CoroutinesReport build_coroutines_report(Session& s, bool with_stacks, std::size_t limit) {
  if (limit == 0) limit = std::numeric_limits<std::size_t>::max();  // -n 0: all
  const CoroutineFrames& c = s.coroutines();
  CoroutinesReport r;
  r.functions = function_rows(s, c);
  if (r.functions.size() > limit) r.functions.resize(limit);
  for (const CoroutineFrame& frame : c.frames) {
    r.total_frames += 1;
    r.total_bytes += frame_bytes(s, frame);
  }
  r.with_stacks = with_stacks;
  if (with_stacks) r.stacks = async_stacks(s, c, limit, r.warnings);
  return r;
}

}  // namespace heapscope
