#include "queries/process_summary.h"
#include "commands/command.h"

namespace heapscope {

namespace {

class SummaryCommand final : public Command {
 public:
  void add_options(CLI::App& app) override {
    app.add_flag("--names", count_names_,
                 "Also name every block and give the share named, by evidence (DWARF, RTTI, shapes...): a pointer "
                 "scan and type propagation over the whole heap, many times the cost of the summary itself");
    app.add_flag("-v,--verbose", verbose_,
                 "Say under each module what debug info it lacks and which package has it (else one line for all)");
  }
  Report run(Session& s) override {
    SummaryReport r = build_summary_report(s, count_names_);
    r.every_module_missing = verbose_;
    return r;
  }

 private:
  bool count_names_ = false;
  bool verbose_ = false;
};

}  // namespace

std::unique_ptr<Command> make_summary_command() { return std::make_unique<SummaryCommand>(); }

}  // namespace heapscope
