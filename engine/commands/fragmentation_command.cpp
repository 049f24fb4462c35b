// The fragmentation command: how full the heap's pages are, what trimming would return and which live
// blocks stand in the way (queries/fragmentation.h).
#include "queries/fragmentation.h"
#include "commands/command.h"
#include "commands/option_checks.h"

namespace heapscope {

namespace {

class FragmentationCommand final : public Command {
 public:
  void add_options(CLI::App& app) override {
    app.add_option("-n,--count", count_, "How many types to list per table (0: all)")->check(whole_number())->capture_default_str();
    app.add_option("--sample", samples_, "Blocks per type shown with a retainer path")->check(whole_number())->capture_default_str();
    app.add_option("--blockers", blockers_, "Trim blockers listed per arena, nearest the heap's end first")
        ->check(whole_number())
        ->capture_default_str();
  }
  Report run(Session& s) override { return build_fragmentation_report(s, count_, samples_, blockers_); }

 private:
  std::size_t count_ = kDefaultFragmentationTypeRows;
  std::size_t samples_ = kDefaultFragmentationSamples;
  std::size_t blockers_ = kDefaultTrimBlockers;
};

}  // namespace

std::unique_ptr<Command> make_fragmentation_command() { return std::make_unique<FragmentationCommand>(); }

}  // namespace heapscope
