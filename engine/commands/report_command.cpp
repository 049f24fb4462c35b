// `report`: summary, leaks, top, roots, fragmentation (and evolution over saved snapshots) in one document (`heapscope report CORE -o report.html`). Each
// part is built by the function its own command uses, so the parts read exactly like those commands.
#include <algorithm>

#include "analysis/evolution.h"
#include "analysis/fragmentation.h"
#include "analysis/leak_report.h"
#include "analysis/process_summary.h"
#include "analysis/retention_report.h"
#include "commands/command.h"
#include "commands/option_checks.h"

namespace heapscope {

namespace {

void add_unique(std::vector<std::string>& into, const std::vector<std::string>& warnings) {
  for (const std::string& w : warnings)
    if (std::find(into.begin(), into.end(), w) == into.end()) into.push_back(w);
}

class ReportCommand final : public Command {
 public:
  void add_options(CLI::App& app) override {
    app.add_option("--examples", examples_, "Example addresses per leak group")->check(whole_number())->capture_default_str();
    app.add_option("--top-by", top_by_, "What the top part ranks by retained bytes: blocks, types or roots")
        ->check(CLI::IsMember({"block", "type", "root"}))
        ->capture_default_str();
    app.add_option("-n,--count", count_, "How many rows the top and roots parts list (0: all)")
        ->check(whole_number())
        ->capture_default_str();
  }

  Report run(Session& s) override {
    ReportBundle bundle;
    bundle.summary = build_summary_report(s);
    if (bundle.summary.heap_error.empty()) {
      try {
        bundle.leaks = build_leaks_report(s, examples_);
        const TopBy by = top_by_ == "type" ? TopBy::type : top_by_ == "root" ? TopBy::root : TopBy::block;
        bundle.top = build_top_report(s, by, count_);
        bundle.roots = build_roots_report(s, count_);
        bundle.fragmentation = build_fragmentation_report(s, kDefaultFragmentationTypeRows, kDefaultFragmentationSamples,
                                                          kDefaultTrimBlockers);
        if (!s.snapshots().all().empty()) bundle.evolution = build_session_evolution(s, EvolutionOrder::final_bytes, count_);
      } catch (const AnalysisError& e) {
        // The summary still describes the process; the analyses that need the graph are left out.
        bundle.leaks.reset();
        bundle.top.reset();
        bundle.roots.reset();
        bundle.fragmentation.reset();
        bundle.evolution.reset();
        bundle.warnings.push_back(std::string("leaks, top and roots left out: ") + e.what());
      }
    } else {
      bundle.warnings.push_back("leaks, top and roots left out: the heap was not walked: " + bundle.summary.heap_error);
    }
    add_unique(bundle.warnings, bundle.summary.warnings);
    if (bundle.leaks) add_unique(bundle.warnings, bundle.leaks->warnings);
    if (bundle.top) add_unique(bundle.warnings, bundle.top->warnings);
    if (bundle.roots) add_unique(bundle.warnings, bundle.roots->warnings);
    if (bundle.fragmentation) add_unique(bundle.warnings, bundle.fragmentation->warnings);
    if (bundle.evolution) add_unique(bundle.warnings, bundle.evolution->warnings);
    return bundle;
  }

 private:
  std::size_t examples_ = 3;
  std::string top_by_ = "block";
  std::size_t count_ = 20;
};

}  // namespace

std::unique_ptr<Command> make_report_command() { return std::make_unique<ReportCommand>(); }

}  // namespace heapscope
