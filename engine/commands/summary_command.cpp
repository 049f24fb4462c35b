#include "queries/process_summary.h"
#include "commands/command.h"

namespace heapscope {

namespace {

class SummaryCommand final : public Command {
 public:
  void add_options(CLI::App&) override {}
  Report run(Session& s) override { return build_summary_report(s); }
};

}  // namespace

std::unique_ptr<Command> make_summary_command() { return std::make_unique<SummaryCommand>(); }

}  // namespace heapscope
