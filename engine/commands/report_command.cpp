// `report`: summary, leaks, top, roots, fragmentation (and evolution over saved snapshots) in one document (`heapscope report CORE -o report.html`). Each
// part is built by the function its own command uses, so the parts read exactly like those commands.
#include <algorithm>

#include "queries/allocation_sites.h"
#include "queries/evolution.h"
#include "queries/fragmentation.h"
#include "queries/leak_report.h"
#include "queries/process_summary.h"
#include "queries/retention_report.h"
#include "commands/command.h"
#include "commands/option_checks.h"

namespace heapscope {

namespace {

// Each part carries the session's warnings too, as it would from its own command: text shows the parts
// one after another, each with its warnings.
template <class Part>
void with_session_warnings(const Session& s, std::optional<Part>& part) {
  if (part) part->warnings = s.warnings_with(std::move(part->warnings));
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
    app.add_option("--earlier", earlier_.cores,
                   "An earlier core of the same program (repeatable): the report gains the evolution of bytes per "
                   "type over them and the current state, with a sparkline per type");
  }
  CoreSeries* core_series() override { return &earlier_; }

  Report run(Session& s) override {
    ReportBundle bundle;
    // The report's parts name the heap's blocks anyway: its summary counts them.
    bundle.summary = build_summary_report(s, /*count_names=*/true);
    if (bundle.summary.heap_error.empty()) {
      try {
        bundle.leaks = build_leaks_report(s, examples_);
        const TopBy by = top_by_ == "type" ? TopBy::type : top_by_ == "root" ? TopBy::root : TopBy::block;
        bundle.top = build_top_report(s, by, count_);
        bundle.roots = build_roots_report(s, count_);
        bundle.fragmentation = build_fragmentation_report(s, kDefaultFragmentationTypeRows, kDefaultFragmentationSamples,
                                                          kDefaultTrimBlockers);
        if (bundle.summary.sites && bundle.summary.sites->present) bundle.sites = histogram_by_site(s, examples_);
        if (!s.snapshots().all().empty()) bundle.evolution = build_session_evolution(s, EvolutionOrder::final_bytes, count_);
      } catch (const AnalysisError& e) {
        // The summary still describes the process; the analyses that need the graph are left out.
        bundle.leaks.reset();
        bundle.top.reset();
        bundle.roots.reset();
        bundle.fragmentation.reset();
        bundle.evolution.reset();
        bundle.sites.reset();
        bundle.warnings.push_back(std::string("leaks, top and roots left out: ") + e.what());
      }
    } else {
      bundle.warnings.push_back("leaks, top and roots left out: the heap was not walked: " + bundle.summary.heap_error);
    }
    bundle.summary.warnings = s.warnings_with(std::move(bundle.summary.warnings));
    with_session_warnings(s, bundle.leaks);
    with_session_warnings(s, bundle.top);
    with_session_warnings(s, bundle.roots);
    with_session_warnings(s, bundle.fragmentation);
    with_session_warnings(s, bundle.evolution);
    with_session_warnings(s, bundle.sites);
    // The bundle's own (why parts are missing) then every part's, each once.
    auto add_part = [&](const std::vector<std::string>& warnings) {
      for (const std::string& w : warnings)
        if (std::find(bundle.warnings.begin(), bundle.warnings.end(), w) == bundle.warnings.end())
          bundle.warnings.push_back(w);
    };
    add_part(bundle.summary.warnings);
    for (const auto* part : {bundle.leaks ? &bundle.leaks->warnings : nullptr, bundle.top ? &bundle.top->warnings : nullptr,
                             bundle.roots ? &bundle.roots->warnings : nullptr,
                             bundle.fragmentation ? &bundle.fragmentation->warnings : nullptr,
                             bundle.evolution ? &bundle.evolution->warnings : nullptr})
      if (part) add_part(*part);
    return bundle;
  }

 private:
  std::size_t examples_ = 3;
  std::string top_by_ = "block";
  std::size_t count_ = 20;
  CoreSeries earlier_ = CoreSeries::given_as_option(/*order_by_time=*/true);
};

}  // namespace

std::unique_ptr<Command> make_report_command() { return std::make_unique<ReportCommand>(); }

}  // namespace heapscope
