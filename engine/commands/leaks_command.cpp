#include "queries/allocation_sites.h"
#include "queries/leak_report.h"
#include "commands/command.h"
#include "commands/option_checks.h"

namespace heapscope {

namespace {

class LeaksCommand final : public Command {
 public:
  void add_options(CLI::App& app) override {
    app.add_option("--examples", examples_, "Example addresses per group")->check(whole_number())->capture_default_str();
    app.add_option("--by", by_, "Group by type and size, or by allocation site (the allocator's own sampled stacks)")
        ->check(CLI::IsMember({"type", "site"}))
        ->capture_default_str();
  }
  Report run(Session& s) override {
    return by_ == "site" ? leaks_by_site(s, examples_) : build_leaks_report(s, examples_);
  }

 private:
  std::size_t examples_ = 3;
  std::string by_ = "type";
};

class HistogramCommand final : public Command {
 public:
  void add_options(CLI::App& app) override {
    app.add_option("--by", by_,
                   "Group by type name, by the source line that declares the type (DWARF), or by allocation site "
                   "(the allocator's own sampled stacks)")
        ->check(CLI::IsMember({"type", "source", "site"}))
        ->capture_default_str();
    app.add_option("--examples", examples_, "Example addresses per row (blocks --type T lists them all)")
        ->check(whole_number())
        ->capture_default_str();
  }
  Report run(Session& s) override {
    return by_ == "site" ? histogram_by_site(s, examples_) : build_histogram(s, by_, examples_);
  }

 private:
  std::string by_ = "type";
  std::size_t examples_ = 3;
};

}  // namespace

std::unique_ptr<Command> make_leaks_command() { return std::make_unique<LeaksCommand>(); }
std::unique_ptr<Command> make_histogram_command() { return std::make_unique<HistogramCommand>(); }

}  // namespace heapscope
