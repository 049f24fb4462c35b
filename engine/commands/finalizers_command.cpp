// The finalizers command: glibc's exit handlers, thread_local destructors and pthread keys with a
// destructor, each with what it alone keeps alive until the process or its thread ends.
#include <algorithm>
#include <map>
#include <unordered_map>

#include "queries/retention_report.h"
#include "commands/command.h"
#include "commands/option_checks.h"

namespace heapscope {

namespace {

FinalizerRow finalizer_row(const Image& image, const FinalizerRegistration& reg) {
  FinalizerRow row;
  row.kind = finalizer_kind_name(reg.kind);
  row.function = reg.function_name;
  row.module = reg.module;
  row.function_address = reg.function;
  row.object = reg.object;
  row.slot = reg.slot_start;
  if (reg.thread < image.threads().size()) row.tid = image.threads()[reg.thread].tid;
  row.exited_thread = reg.exited_thread;
  if (reg.kind == FinalizerKind::pthread_key) row.key = reg.key;
  row.variable = reg.variable;
  return row;
}

std::vector<FinalizerFunctionGroup> function_groups(const std::vector<FinalizerRow>& rows) {
  std::vector<FinalizerFunctionGroup> groups;
  std::map<std::pair<std::string, std::string>, std::size_t> by_function;
  for (const FinalizerRow& row : rows) {
    const auto [it, fresh] = by_function.try_emplace({row.function, row.module}, groups.size());
    if (fresh) groups.push_back({row.function, row.module, row.kind, 0, 0, 0});
    FinalizerFunctionGroup& g = groups[it->second];
    if (g.kind != row.kind) g.kind = "mixed";
    ++g.registrations;
    g.retained_bytes += row.retained.bytes;
    g.retained_blocks += row.retained.blocks;
  }
  std::stable_sort(groups.begin(), groups.end(), [](const auto& a, const auto& b) {
    return a.retained_bytes != b.retained_bytes ? a.retained_bytes > b.retained_bytes : a.registrations > b.registrations;
  });
  return groups;
}

FinalizersReport build_finalizers_report(Session& s, std::size_t count) {
  const Retention& r = s.retention();
  const std::vector<FinalizerRegistration>& registrations = s.roots().finalizers;
  std::unordered_map<std::uint32_t, std::uint32_t> node_of;  // registration → root node id
  for (std::size_t i = 0; i < r.root_nodes().size(); ++i)
    if (const RootNode& n = r.root_nodes()[i]; n.finalizer != RootNode::kNoFinalizer) node_of[n.finalizer] = r.root_node_id(i);

  FinalizersReport out;
  out.heap = heap_totals(r);
  std::uint64_t of_threads_bytes = 0, of_threads_blocks = 0;
  for (std::uint32_t i = 0; i < registrations.size(); ++i) {
    FinalizerRow row = finalizer_row(s.image(), registrations[i]);
    if (const auto it = node_of.find(i); it != node_of.end()) {
      row.label = r.root(it->second).label;
      row.retained = retained_of(r, it->second);
      if (r.root(it->second).owner_kind == OwnerKind::thread) {
        of_threads_bytes += row.retained.bytes;
        of_threads_blocks += row.retained.blocks;
      }
    }
    out.registrations.push_back(std::move(row));
  }
  std::stable_sort(out.registrations.begin(), out.registrations.end(),
                   [](const FinalizerRow& a, const FinalizerRow& b) { return a.retained.bytes > b.retained.bytes; });
  for (auto kind : {FinalizerKind::atexit, FinalizerKind::on_exit, FinalizerKind::cxa_atexit, FinalizerKind::tls_dtor,
                    FinalizerKind::pthread_key, FinalizerKind::gc_finalizer}) {
    FinalizerKindTotal total{finalizer_kind_name(kind)};
    for (const FinalizerRow& row : out.registrations)
      if (row.kind == total.kind) ++total.registrations, total.retained_bytes += row.retained.bytes;
    out.kinds.push_back(std::move(total));
  }
  out.functions = function_groups(out.registrations);
  const std::uint32_t process_wide = r.owner_kind_node(OwnerKind::finalizer);
  const Retained by_process_wide = process_wide == kNoNode ? Retained{} : retained_of(r, process_wide);
  out.total = retained_total(r, by_process_wide.bytes + of_threads_bytes, by_process_wide.blocks + of_threads_blocks);
  out.registrations_total = out.registrations.size();
  if (count && out.registrations.size() > count) out.registrations.resize(count);
  // Said here only: methods, not problems, but ones the reader of this report should know about.
  const auto& notes = s.roots().finalizer_notes;
  out.warnings.insert(out.warnings.end(), notes.begin(), notes.end());
  return out;
}

class FinalizersCommand final : public Command {
 public:
  void add_options(CLI::App& app) override {
    app.add_option("-n,--count", count_, "How many registrations to list one by one, largest retained first (0: all)")
        ->check(whole_number())
        ->capture_default_str();
    app.add_flag_callback("--all", [this] { count_ = 0; }, "List every registration (-n 0)");
  }
  Report run(Session& s) override { return build_finalizers_report(s, count_); }

 private:
  std::size_t count_ = 20;
};

}  // namespace

std::unique_ptr<Command> make_finalizers_command() { return std::make_unique<FinalizersCommand>(); }

}  // namespace heapscope
