// Commands over the dominator tree: top (largest retained sizes and suspects) and roots (retention per
// root kind and per root).
#include "queries/retention_report.h"
#include "commands/command.h"
#include "commands/option_checks.h"

namespace heapscope {

namespace {

class TopCommand final : public Command {
 public:
  void add_options(CLI::App& app) override {
    app.add_option("--by", by_,
                   "Rank blocks, types (outermost instances), allocation sites (outermost blocks of each) or roots "
                   "by retained bytes")
        ->check(CLI::IsMember({"block", "type", "site", "root"}))
        ->capture_default_str();
    app.add_option("-n,--count", count_, "How many to list (0: all)")->check(whole_number())->capture_default_str();
  }
  Report run(Session& s) override {
    const TopBy by = by_ == "type"   ? TopBy::type
                     : by_ == "site" ? TopBy::site
                     : by_ == "root" ? TopBy::root
                                     : TopBy::block;
    return build_top_report(s, by, count_);
  }

 private:
  std::string by_ = "block";
  std::size_t count_ = 10;
};

class RootsCommand final : public Command {
 public:
  void add_options(CLI::App& app) override {
    app.add_option("-n,--count", count_, "How many roots to list, largest first (0: all)")
        ->check(whole_number())
        ->capture_default_str();
  }
  Report run(Session& s) override { return build_roots_report(s, count_); }

 private:
  std::size_t count_ = 20;
};

}  // namespace

std::unique_ptr<Command> make_top_command() { return std::make_unique<TopCommand>(); }
std::unique_ptr<Command> make_roots_command() { return std::make_unique<RootsCommand>(); }

}  // namespace heapscope
