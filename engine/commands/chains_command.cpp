// The chains command: maximal chains of same-type blocks linked one to one (queries/chains.h).
#include "queries/chains.h"
#include "commands/command.h"
#include "commands/option_checks.h"

namespace heapscope {

namespace {

class ChainsCommand final : public Command {
 public:
  void add_options(CLI::App& app) override {
    app.add_option("--min-length", min_length_, "Shortest chain to list, in blocks")
        ->check(whole_number(2) & CLI::Range(std::size_t{2}, std::size_t{0xffffffffu}))
        ->capture_default_str();
    app.add_option("-n,--count", count_, "How many chains to list, most bytes first (0: all)")
        ->check(whole_number())
        ->capture_default_str();
  }
  Report run(Session& s) override { return build_chains_report(s, min_length_, count_); }

 private:
  std::size_t min_length_ = kDefaultMinChainLength;
  std::size_t count_ = 20;
};

}  // namespace

std::unique_ptr<Command> make_chains_command() { return std::make_unique<ChainsCommand>(); }

}  // namespace heapscope
