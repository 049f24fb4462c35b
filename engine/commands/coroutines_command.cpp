// The coroutines command: C++20 coroutine frames per coroutine function; --stacks adds the async stacks.
#include "queries/coroutine_report.h"
#include "commands/command.h"
#include "commands/option_checks.h"

namespace heapscope {

namespace {

class CoroutinesCommand final : public Command {
 public:
  void add_options(CLI::App& app) override {
    app.add_flag("--stacks", stacks_,
                 "Also list each async stack (frames awaiting one another, outermost first), identical stacks folded");
    app.add_option("-n,--count", limit_, "How many functions and stacks to list (0: all)")
        ->check(whole_number())
        ->capture_default_str();
  }
  Report run(Session& s) override { return build_coroutines_report(s, stacks_, limit_); }

 private:
  bool stacks_ = false;
  std::size_t limit_ = 20;
};

}  // namespace

std::unique_ptr<Command> make_coroutines_command() { return std::make_unique<CoroutinesCommand>(); }

}  // namespace heapscope
