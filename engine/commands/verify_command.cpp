// The verify command: the allocator's checks of its own structures for damage (Session::verification). It
// succeeds whether or not it finds problems; finding them is its result.
#include "commands/command.h"

namespace heapscope {

namespace {

class VerifyCommand final : public Command {
 public:
  void add_options(CLI::App&) override {}

  Report run(Session& s) override {
    const HeapModel& heap = s.heap();
    VerifyReport r;
    r.allocator = heap.allocator;
    r.version = heap.version;
    r.result = s.verification();
    return r;
  }
};

}  // namespace

std::unique_ptr<Command> make_verify_command() { return std::make_unique<VerifyCommand>(); }

}  // namespace heapscope
