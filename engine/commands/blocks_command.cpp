#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <unordered_map>

#include "commands/block_columns.h"
#include "commands/command.h"
#include "commands/option_checks.h"
#include "types/content_naming.h"

namespace heapscope {

namespace {

const std::vector<std::string> kVerdictSelections = {"leaked", "reachable", "possibly", "direct", "indirect", "cycle"};

bool by_verdict(const std::string& wanted) {
  return std::find(kVerdictSelections.begin(), kVerdictSelections.end(), wanted) != kVerdictSelections.end();
}

// What a selection keeps, decided once per command rather than by comparing names at every block (at 5M
// blocks those comparisons cost more than the walk's copy of the heap).
struct Wanted {
  std::array<bool, kBlockStateCount> states{};
  std::array<bool, 5> verdicts{};  // by Verdict
  bool possibly_only = false;      // --state possibly: reachable only through interior pointers
};

Wanted wanted_blocks(const std::string& wanted) {
  Wanted w;
  for (int i = 0; i < kBlockStateCount; ++i) {
    const auto state = static_cast<BlockState>(i);
    w.states[i] = wanted == "all" || (wanted == "used" && is_allocated(state)) ||
                  (wanted == "free" && !is_allocated(state)) || wanted == block_state_name(state);
  }
  for (std::size_t i = 0; i < w.verdicts.size(); ++i) {
    const auto verdict = static_cast<Verdict>(i);
    w.verdicts[i] = (wanted == "leaked" && is_leaked(verdict)) || wanted == verdict_name(verdict);
  }
  w.possibly_only = wanted == "possibly";
  return w;
}

// Types only matter, and are only worth computing, when allocated blocks are listed.
void add_types(Session& s, std::span<const BlockId> selected, BlocksReport& r) {
  const auto& blocks = s.heap().blocks;
  if (std::none_of(selected.begin(), selected.end(), [&](BlockId i) { return is_allocated(blocks[i].state); }))
    return;
  TypeColumn column = block_type_column(s, selected);
  r.type_ids = std::move(column.ids);
  r.type_names = std::move(column.names);
  r.type_namings = std::move(column.namings);
  for (BlockId i : selected)
    r.texts.push_back(is_allocated(blocks[i].state) ? text_preview(s.image(), blocks[i]).value_or("") : "");
}

class BlocksCommand final : public Command {
 public:
  void add_options(CLI::App& app) override {
    app.add_option("--state", state_,
                   "Which blocks: used (in_use and mmapped), free (bins, tcache, fastbins, top), all, one "
                   "state name, or by leak verdict: leaked (direct, indirect, cycle), reachable, possibly")
        ->check(CLI::IsMember({"used", "free", "all", "in_use", "mmapped", "tcache", "fastbin", "top", "leaked",
                               "reachable", "possibly", "direct", "indirect", "cycle"}))
        ->capture_default_str();
    app.add_option("--min-size", min_size_, "Only blocks with at least this many usable bytes")
        ->check(whole_number())
        ->capture_default_str();
    app.add_option("--type", type_,
                   "Only allocated blocks of this type, named as histogram and leaks name it (\"Node\", "
                   "\"unknown (56 bytes)\")");
    app.add_option("--limit", limit_, "List at most this many blocks, lowest addresses first (0: all)")
        ->check(whole_number())
        ->capture_default_str();
  }

  Report run(Session& s) override {
    BlockSelection selected = select(s);
    const HeapModel& heap = s.heap();
    BlocksReport r;
    r.matched = selected.matched;
    r.verdicts = std::move(selected.verdicts);
    r.possibly = std::move(selected.possibly);
    for (BlockId i : selected.blocks) r.blocks.push_back(heap.blocks[i]);
    add_types(s, selected.blocks, r);
    for (const ArenaInfo& a : heap.arenas) r.arena_addresses.push_back(a.address);
    r.selection = fmt::format("{} blocks{}{}", state_, type_.empty() ? "" : " of type " + type_,
                              min_size_ ? fmt::format(" of at least {} bytes", min_size_) : "");
    return r;
  }

  // The blocks the options select, cut to --limit.
  BlockSelection select(Session& s) const {
    const HeapModel& heap = s.heap();
    BlockSelection r;
    std::vector<BlockId>& selected = r.blocks;
    const Wanted wanted = wanted_blocks(state_);
    selected.reserve(heap.blocks.size());  // an id per block at most: pages are only touched as ids are written
    if (by_verdict(state_)) {
      const LeakVerdicts& v = s.verdicts();
      for (std::size_t i = 0; i < heap.blocks.size(); ++i) {
        const bool chosen = wanted.possibly_only ? v.possibly[i] != 0 : wanted.verdicts[static_cast<std::size_t>(v.verdict[i])];
        if (chosen && heap.blocks[i].usable_size() >= min_size_) {
          selected.push_back(static_cast<BlockId>(i));
          r.verdicts.push_back(verdict_name(v.verdict[i]));
          r.possibly.push_back(v.possibly[i] != 0);
        }
      }
    } else {
      for (std::size_t i = 0; i < heap.blocks.size(); ++i) {
        const Block& b = heap.blocks[i];
        if (wanted.states[static_cast<std::size_t>(b.state)] && b.usable_size() >= min_size_)
          selected.push_back(static_cast<BlockId>(i));
      }
    }
    if (!type_.empty()) keep_type(s, selected, r.verdicts, r.possibly);
    r.matched = selected.size();
    if (limit_ && selected.size() > limit_) {
      selected.resize(limit_);
      if (!r.verdicts.empty()) r.verdicts.resize(limit_), r.possibly.resize(limit_);
    }
    return r;
  }

 private:
  // Keeps the allocated blocks named type_ (and their verdicts, when listed by verdict).
  void keep_type(Session& s, std::vector<BlockId>& selected, std::vector<const char*>& verdicts,
                 std::vector<bool>& possibly) const {
    const auto& blocks = s.heap().blocks;
    const BlockTypes& types = s.types();
    std::size_t kept = 0;
    for (std::size_t k = 0; k < selected.size(); ++k) {
      const BlockId i = selected[k];
      if (!is_allocated(blocks[i].state) || types.name(i, blocks[i]) != type_) continue;
      selected[kept] = i;
      if (!verdicts.empty()) verdicts[kept] = verdicts[k], possibly[kept] = possibly[k];
      ++kept;
    }
    selected.resize(kept);
    if (!verdicts.empty()) verdicts.resize(kept), possibly.resize(kept);
  }

  std::string state_ = "used";
  std::uint64_t min_size_ = 0;
  std::string type_;
  std::size_t limit_ = 0;
};

}  // namespace

std::unique_ptr<Command> make_blocks_command() { return std::make_unique<BlocksCommand>(); }

BlockSelection select_blocks(Session& session, const std::vector<std::string>& options) {
  BlocksCommand command;
  CLI::App app("blocks", "blocks");
  command.add_options(app);
  std::vector<std::string> args(options.rbegin(), options.rend());  // CLI11 takes the words last-first
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    throw AnalysisError(fmt::format("blocks: {}", e.what()));
  }
  return command.select(session);
}

TypeColumn block_type_column(Session& s, std::span<const BlockId> selected) {
  const auto& blocks = s.heap().blocks;
  TypeColumn column;
  column.namings.emplace_back(naming_name(Naming::none));
  column.ids.reserve(selected.size());
  if (std::none_of(selected.begin(), selected.end(), [&](BlockId i) { return is_allocated(blocks[i].state); })) {
    column.ids.assign(selected.size(), 0);
    return column;
  }
  // Leaked blocks alone are named at the cost of the leaks (Session::leak_names).
  const bool only_leaks = std::all_of(selected.begin(), selected.end(), [&](BlockId i) {
    return !is_allocated(blocks[i].state) || is_leaked(s.verdicts().verdict[i]);
  });
  const BlockTypes& types = only_leaks ? s.leak_names().types : s.types();
  std::unordered_map<std::uint32_t, std::uint32_t> index;  // BlockTypes id → names index
  for (BlockId i : selected) {
    const std::uint32_t id = is_allocated(blocks[i].state) ? types.type_id(i) : BlockTypes::kUnknown;
    if (id == BlockTypes::kUnknown) {
      column.ids.push_back(0);
      continue;
    }
    auto [it, fresh] = index.try_emplace(id, static_cast<std::uint32_t>(column.names.size()));
    if (fresh) {
      column.names.push_back(types.name(i, blocks[i]));
      column.namings.emplace_back(naming_name(types.naming_of(id)));
    }
    column.ids.push_back(it->second);
  }
  return column;
}

SiteColumn block_site_column(Session& s, std::span<const BlockId> selected) {
  SiteColumn column;
  column.ids.assign(selected.size(), -1);
  const Provenance& provenance = s.provenance();
  if (!provenance.present()) return column;
  for (const AllocationSite& site : provenance.sites) column.labels.push_back(site.label());
  for (std::size_t k = 0; k < selected.size(); ++k)
    if (const SampledBlock* sampled = provenance.of(selected[k])) column.ids[k] = static_cast<std::int32_t>(sampled->site);
  return column;
}

}  // namespace heapscope
