#include "queries/thread_report.h"

#include <algorithm>
#include <map>
#include <unordered_map>

#include "queries/block_refs.h"
#include "queries/retention_paths.h"
#include "image/word_scan.h"

namespace heapscope {

namespace {

// A thread's frames and local variables that retain anything, largest first. A frame is shown beside its
// variables only when it retains more than the largest of them (words outside any variable, or blocks two
// of its variables share); otherwise its variable says it all.
std::vector<FrameRetention> frames_worth_showing(std::vector<FrameRetention> rows) {
  std::unordered_map<std::uint32_t, std::uint64_t> largest_variable;  // per frame
  for (const FrameRetention& f : rows)
    if (!f.variable.empty()) largest_variable[f.frame] = std::max(largest_variable[f.frame], f.retained);
  std::erase_if(rows, [&](const FrameRetention& f) {
    if (f.retained == 0) return true;
    const auto it = largest_variable.find(f.frame);
    return f.variable.empty() && it != largest_variable.end() && it->second >= f.retained;
  });
  std::stable_sort(rows.begin(), rows.end(), [](const FrameRetention& a, const FrameRetention& b) {
    return a.retained != b.retained ? a.retained > b.retained : a.frame < b.frame;
  });
  return rows;
}

std::vector<LiveThreadRow> live_threads(Session& s) {
  const Image& image = s.image();
  const Retention& r = s.retention();
  std::vector<LiveThreadRow> rows;
  std::vector<std::vector<FrameRetention>> frame_rows(image.threads().size());
  for (const ThreadState& t : image.threads()) {
    LiveThreadRow row;
    row.tid = t.tid;
    row.name = t.name;
    if (const MemoryRegion* stack = image.region_at(t.sp())) {
      row.stack_start = stack->start;
      row.stack_end = stack->end;
    }
    rows.push_back(row);
  }
  // The ownership tree's thread owners and their parts (model/retention.h): the same numbers `roots` and
  // `top` show.
  for (std::size_t i = 0; i < r.root_nodes().size(); ++i) {
    const RootNode& n = r.root_nodes()[i];
    if (n.owner_kind != OwnerKind::thread || n.thread >= rows.size()) continue;
    const std::uint32_t node = r.root_node_id(i);
    const std::uint64_t bytes = r.retained_bytes(node);
    LiveThreadRow& row = rows[n.thread];
    if (n.level == RootNode::Level::owner) {
      row.retained = bytes;
      continue;
    }
    const bool whole_part = r.root_nodes()[n.parent].level == RootNode::Level::owner;
    if (!whole_part) {
      if (n.kind == RootKind::stack && n.frame != RootNode::kNoFrame) frame_rows[n.thread].push_back({n.frame, n.label, n.variable, bytes});
      continue;
    }
    if (n.kind == RootKind::registers) row.registers_retained += bytes;
    if (n.kind == RootKind::stack) row.stack_retained += bytes;
    if (n.kind == RootKind::tls || n.kind == RootKind::dynamic_tls) row.tls_retained += bytes;
  }
  for (std::size_t t = 0; t < rows.size(); ++t) rows[t].frames = frames_worth_showing(std::move(frame_rows[t]));

  return rows;
}

std::vector<ExitedThreadRow> exited_threads(Session& s) {
  const Retention& r = s.retention();
  std::map<Address, std::uint64_t> descriptor_retained;
  for (std::size_t i = 0; i < r.root_nodes().size(); ++i) {
    const RootNode& n = r.root_nodes()[i];
    if (n.kind == RootKind::exited_thread) descriptor_retained[n.address] += r.retained_bytes(r.root_node_id(i));
  }
  std::vector<ExitedThreadRow> rows;
  for (const LibcThread& t : s.libc_threads().threads) {
    if (!t.exited() || t.stack_start == 0) continue;  // as the roots see them
    ExitedThreadRow row;
    row.pthread = t.descriptor;
    row.stack_start = t.stack_start;
    row.stack_end = t.stack_end;
    row.in_stack_cache = t.list == LibcThread::List::cache;
    row.descriptor_retained = descriptor_retained[t.descriptor];
    rows.push_back(row);
  }
  return rows;
}

// Finds every word equal to an exited thread's pthread_t, in allocated blocks and in roots. A descriptor
// names itself (header.self, and joinid once detached): those words are no holders.
class HandleScan {
 public:
  HandleScan(Session& s, std::vector<ExitedThreadRow>& exited) : s_(s), exited_(exited) {
    for (std::size_t i = 0; i < exited.size(); ++i) by_handle_[exited[i].pthread] = i;
  }

  std::vector<HandleHolder> run(std::size_t max_depth) {
    scan_blocks(max_depth);
    scan_roots();
    return std::move(holders_);
  }

 private:
  void scan_blocks(std::size_t max_depth) {
    const auto& blocks = s_.heap().blocks;
    for (BlockId b = 0; b < blocks.size(); ++b) {
      if (!is_allocated(blocks[b].state)) continue;
      HandleHolder holder;
      const Address start = blocks[b].address();
      for_each_word(s_.image(), start, start + blocks[b].usable_size(),
                    [&](Address, std::uint64_t word) { note(holder, word); });
      if (holder.handles.empty()) continue;
      holder.block = block_ref(s_, b);
      RetainersReport paths = find_retainers(s_, s_.names(), RetainedSizes::dominator_tree, b, start, 1, max_depth);
      if (!paths.paths.empty()) holder.path = std::move(paths.paths.front());
      holder.retained_by = dominating_root(b);
      holders_.push_back(std::move(holder));
    }
  }

  // The label of the root node the block hangs under in the dominator tree, if a single root holds it.
  std::string dominating_root(BlockId b) {
    const Retention& r = s_.retention();
    std::uint32_t node = b;
    while (r.is_block(node) && r.reachable(node)) node = r.dominator(node);
    return r.is_block(node) || !r.is_holder(node) ? std::string() : r.root(node).label;
  }

  void scan_roots() {
    const Image& image = s_.image();
    for (const RootRange& range : s_.roots().ranges) {
      if (range.kind == RootKind::registers) {
        for (const RegisterWord& w : register_words(image.threads()[range.thread])) {
          HandleHolder holder;
          note(holder, w.value);
          add_root_holder(std::move(holder), range, w.slot, 0);
        }
        continue;
      }
      for_each_word(image, range.start, range.end, [&](Address at, std::uint64_t word) {
        if (range.kind == RootKind::exited_thread && word == range.anchor) return;  // itself
        HandleHolder holder;
        note(holder, word);
        add_root_holder(std::move(holder), range, at, at);
      });
    }
  }

  void add_root_holder(HandleHolder holder, const RootRange& range, Address word, Address address) {
    if (holder.handles.empty()) return;
    holder.root = RootRef{root_kind_name(range.kind), describe_root(s_.image(), s_.symbols(), range, word), address, {}};
    holders_.push_back(std::move(holder));
  }

  void note(HandleHolder& holder, std::uint64_t word) {
    const auto it = by_handle_.find(word);
    if (it == by_handle_.end()) return;
    ExitedThreadRow& thread = exited_[it->second];
    if (std::find(holder.handles.begin(), holder.handles.end(), word) != holder.handles.end()) return;
    holder.handles.push_back(word);
    holder.stack_bytes += thread.stack_end - thread.stack_start;
    ++thread.holders;
  }

  Session& s_;
  std::vector<ExitedThreadRow>& exited_;
  std::unordered_map<Address, std::size_t> by_handle_;
  std::vector<HandleHolder> holders_;
};

std::vector<HandleHolderGroup> group_holders(const std::vector<HandleHolder>& holders) {
  std::map<std::string, HandleHolderGroup> by_name;
  for (const HandleHolder& h : holders) {
    std::string name = h.root ? h.root->label : std::string();
    if (h.block) name = h.retained_by.empty() ? h.block->type : h.block->type + " under " + h.retained_by;
    HandleHolderGroup& g = by_name[name];
    g.holder = name;
    ++g.holders;
    g.handles += h.handles.size();
    g.stack_bytes += h.stack_bytes;
  }
  std::vector<HandleHolderGroup> groups;
  for (auto& [name, g] : by_name) groups.push_back(std::move(g));
  std::stable_sort(groups.begin(), groups.end(),
                   [](const HandleHolderGroup& a, const HandleHolderGroup& b) { return a.stack_bytes > b.stack_bytes; });
  return groups;
}

}  // namespace

ThreadsReport build_threads_report(Session& s, std::size_t max_depth) {
  ThreadsReport out;
  out.threads = live_threads(s);
  out.exited = exited_threads(s);
  if (!out.exited.empty()) out.holders = HandleScan(s, out.exited).run(max_depth);
  std::stable_sort(out.holders.begin(), out.holders.end(), [](const HandleHolder& a, const HandleHolder& b) {
    return a.handles.size() > b.handles.size();
  });
  out.holder_groups = group_holders(out.holders);
  for (const ExitedThreadRow& t : out.exited) {
    out.exited_stack_bytes += t.stack_end - t.stack_start;
    out.exited_descriptor_retained += t.descriptor_retained;
    if (t.holders == 0) ++out.unheld_handles;
  }
  return out;
}

}  // namespace heapscope
