// Commands about one block, named by an address anywhere inside it.
#include "queries/allocation_sites.h"
#include "queries/block_fields.h"
#include "queries/block_refs.h"
#include "queries/retention_paths.h"
#include "commands/command.h"
#include "commands/option_checks.h"

namespace heapscope {

namespace {

void add_stack_flag(CLI::App& app, bool& whole_stack) {
  app.add_flag("--stack", whole_stack, "Show every frame of the block's allocation stack, not only the top ones");
}

void add_address(CLI::App& app, std::string& address) {
  app.add_option("ADDR", address, "An address inside the block (0x-prefixed hex or decimal; an expression in a debugger)")
      ->required();
}

class RetainersCommand final : public Command {
 public:
  void add_options(CLI::App& app) override {
    add_address(app, address_);
    app.add_option("--paths", paths_, "How many paths to show (from different roots)")->check(whole_number(1))->capture_default_str();
    app.add_option("--max-depth", depth_, "Longest path to look for, in blocks")->check(whole_number(1))->capture_default_str();
    add_stack_flag(app, whole_stack_);
  }
  Report run(Session& s) override {
    Address query = 0;
    const BlockId b = block_argument(s, address_, &query);
    const BlockId asked[] = {b};
    RetainersReport r = find_retainers(s, s.names_for(asked), RetainedSizes::cheapest, b, query, paths_, depth_);
    r.allocated_at = allocated_at(s, b, whole_stack_ ? 0 : kSiteFramesShown);
    return r;
  }

 private:
  bool whole_stack_ = false;
  std::string address_;
  std::size_t paths_ = 1;
  std::size_t depth_ = kDefaultPathDepth;
};

class RefsCommand final : public Command {
 public:
  void add_options(CLI::App& app) override { add_address(app, address_); }
  Report run(Session& s) override {
    Address query = 0;
    const BlockId b = block_argument(s, address_, &query);
    return find_referrers(s, b, query);
  }

 private:
  std::string address_;
};

class DescribeCommand final : public Command {
 public:
  void add_options(CLI::App& app) override {
    add_address(app, address_);
    app.add_option("--bytes", bytes_, "How many bytes of the block to dump")->check(whole_number())->capture_default_str();
    app.add_option("--fields", fields_, "How many fields of a DWARF-typed block to show, nested ones included")
        ->check(whole_number())
        ->capture_default_str();
    add_stack_flag(app, whole_stack_);
  }
  Report run(Session& s) override {
    Address query = 0;
    const BlockId b = block_argument(s, address_, &query);
    DescribeReport r = describe_block(s, b, query, bytes_, fields_);
    r.allocated_at = allocated_at(s, b, whole_stack_ ? 0 : kSiteFramesShown);
    if (!r.allocated_at) r.no_site = no_site_reason(s.provenance(), s.heap().blocks[b]);
    return r;
  }

 private:
  bool whole_stack_ = false;
  std::string address_;
  std::size_t bytes_ = 64;
  std::size_t fields_ = kDefaultFieldRows;
};

}  // namespace

std::unique_ptr<Command> make_retainers_command() { return std::make_unique<RetainersCommand>(); }
std::unique_ptr<Command> make_refs_command() { return std::make_unique<RefsCommand>(); }
std::unique_ptr<Command> make_describe_command() { return std::make_unique<DescribeCommand>(); }

}  // namespace heapscope
