// The threads command: retention per live thread, and the exited threads glibc still holds.
#include "queries/thread_report.h"
#include "commands/command.h"
#include "commands/option_checks.h"

namespace heapscope {

namespace {

class ThreadsCommand final : public Command {
 public:
  void add_options(CLI::App& app) override {
    app.add_option("--max-depth", max_depth_, "Longest retainer path searched for a block holding pthread_t values")
        ->check(whole_number(1))
        ->capture_default_str();
  }
  Report run(Session& s) override { return build_threads_report(s, max_depth_); }

 private:
  std::size_t max_depth_ = 64;
};

}  // namespace

std::unique_ptr<Command> make_threads_command() { return std::make_unique<ThreadsCommand>(); }

}  // namespace heapscope
