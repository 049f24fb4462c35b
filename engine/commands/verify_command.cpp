// The verify command: checks glibc malloc's structures for damage (heap/glibc/heap_verify.h). It
// succeeds whether or not it finds problems; finding them is its result.
#include "commands/command.h"
#include "heap/glibc/heap_verify.h"

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
    r.result = glibc::verify_heap(s.image(), s.symbols(), heap);
    r.warnings = s.warnings();
    return r;
  }
};

}  // namespace

std::unique_ptr<Command> make_verify_command() { return std::make_unique<VerifyCommand>(); }

}  // namespace heapscope
