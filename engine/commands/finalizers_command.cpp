// The finalizers command: glibc's exit handlers, thread_local destructors and pthread keys with a
// destructor, each with what it alone keeps alive until the process or its thread ends.
#include <algorithm>
#include <unordered_map>

#include "queries/retention_report.h"
#include "commands/command.h"

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

FinalizersReport build_finalizers_report(Session& s) {
  const Retention& r = s.retention();
  const std::vector<FinalizerRegistration>& registrations = s.roots().finalizers;
  std::unordered_map<std::uint32_t, std::uint32_t> node_of;  // registration → root node id
  for (std::size_t i = 0; i < r.root_nodes().size(); ++i)
    if (const RootNode& n = r.root_nodes()[i]; n.kind == RootKind::finalizer) node_of[n.finalizer] = r.root_node_id(i);

  FinalizersReport out;
  out.heap = heap_totals(r);
  for (std::uint32_t i = 0; i < registrations.size(); ++i) {
    FinalizerRow row = finalizer_row(s.image(), registrations[i]);
    if (const auto it = node_of.find(i); it != node_of.end()) {
      row.label = r.root(it->second).label;
      row.retained = retained_of(r, it->second);
    }
    out.registrations.push_back(std::move(row));
  }
  std::stable_sort(out.registrations.begin(), out.registrations.end(),
                   [](const FinalizerRow& a, const FinalizerRow& b) { return a.retained.bytes > b.retained.bytes; });
  for (auto kind : {FinalizerKind::atexit, FinalizerKind::on_exit, FinalizerKind::cxa_atexit, FinalizerKind::tls_dtor,
                    FinalizerKind::pthread_key}) {
    FinalizerKindTotal total{finalizer_kind_name(kind)};
    for (const FinalizerRow& row : out.registrations)
      if (row.kind == total.kind) ++total.registrations, total.retained_bytes += row.retained.bytes;
    out.kinds.push_back(std::move(total));
  }
  if (r.kind_count() > static_cast<std::size_t>(RootKind::finalizer))
    out.total = retained_of(r, r.kind_node_id(RootKind::finalizer));
  // Said here only: methods, not problems, but ones the reader of this report should know about.
  const auto& notes = s.roots().finalizer_notes;
  out.warnings.insert(out.warnings.end(), notes.begin(), notes.end());
  return out;
}

class FinalizersCommand final : public Command {
 public:
  void add_options(CLI::App&) override {}
  Report run(Session& s) override { return build_finalizers_report(s); }
};

}  // namespace

std::unique_ptr<Command> make_finalizers_command() { return std::make_unique<FinalizersCommand>(); }

}  // namespace heapscope
