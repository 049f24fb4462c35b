// The snapshot commands: `snapshot save|diff|list|drop|load` keep named heap snapshots in the session's
// SnapshotStore (shared by every Session of a debugger target) and compare one with the current state;
// `diff OLD` does the same with an earlier core's snapshot; `evolution [CORE…]` shows bytes per type over
// every saved snapshot, the earlier cores given, and the current state.
#include <fmt/format.h>

#include <cctype>

#include "queries/evolution.h"
#include "queries/heap_snapshot.h"
#include "queries/snapshot_diff.h"
#include "queries/snapshot_file.h"
#include "commands/command.h"
#include "commands/option_checks.h"

namespace heapscope {

namespace {

std::string saved_names(const SnapshotStore& store) {
  std::string names;
  for (const SnapshotStore::Ptr& p : store.all()) names += (names.empty() ? "" : ", ") + p->name;
  return names.empty() ? "none saved yet" : "saved: " + names;
}

// `verb`: "diff: " where the options belong to one verb of several, empty where to the command.
void add_diff_options(CLI::App& app, std::size_t& count, std::size_t& samples, const std::string& verb) {
  auto described = [&](std::string text) {
    if (verb.empty()) text[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(text[0])));
    return verb + text;
  };
  app.add_option("-n,--count", count, described("rows per table, most growth first (0: all)"))
      ->check(whole_number())
      ->capture_default_str();
  app.add_option("--sample", samples,
                 described("new blocks shown with their retainers, per type of largest net growth (new less gone "
                           "bytes)"))
      ->check(whole_number())
      ->capture_default_str();
}

DiffOptions diff_options(std::size_t count, std::size_t samples) {
  DiffOptions options;
  options.count = count;
  options.samples_per_type = samples;
  return options;
}

class SnapshotCommand final : public Command {
 public:
  void add_options(CLI::App& app) override {
    app.add_option("VERB", verb_,
                   "save NAME: keep the current heap as NAME; diff NAME: NAME against the current heap; list; "
                   "drop NAME; load NAME FILE: a snapshot saved with --file")
        ->required()
        ->check(CLI::IsMember({"save", "diff", "list", "drop", "load"}));
    app.add_option("NAME", name_, "The snapshot's name");
    app.add_option("FILE", load_path_, "load: the snapshot file to read");
    app.add_option("--file", save_path_, "save: also write the snapshot to this JSON file (docs/json.md)")
        ->option_text("PATH");
    add_diff_options(app, count_, samples_, "diff: ");
  }

  Report run(Session& s) override {
    SnapshotStore& store = s.snapshots();
    if (verb_ == "list") return list(store);
    if (name_.empty()) throw AnalysisError("snapshot " + verb_ + " needs a NAME");
    if (verb_ == "save") return save(s, store);
    if (verb_ == "load") return load(store);
    SnapshotStore::Ptr saved = store.find(name_);
    if (!saved) throw AnalysisError(fmt::format("no snapshot named '{}' ({})", name_, saved_names(store)));
    if (verb_ == "drop") {
      store.drop(name_);
      return SnapshotReport{"drop", "", {snapshot_info(*saved)}, {}};
    }
    return diff_with_current(s, *saved, take_snapshot(s, current_state_name(s)), diff_options(count_, samples_));
  }

 private:
  SnapshotReport list(const SnapshotStore& store) {
    SnapshotReport report{"list", "", {}, {}};
    for (const SnapshotStore::Ptr& p : store.all()) report.snapshots.push_back(snapshot_info(*p));
    return report;
  }

  SnapshotReport save(Session& s, SnapshotStore& store) {
    HeapSnapshot snapshot = take_snapshot(s, name_);
    if (!save_path_.empty()) write_snapshot_file(save_path_, snapshot);
    SnapshotReport report{"save", save_path_, {snapshot_info(snapshot)}, {}};
    store.save(std::move(snapshot));
    return report;
  }

  SnapshotReport load(SnapshotStore& store) {
    if (load_path_.empty()) throw AnalysisError("snapshot load needs a NAME and a FILE");
    HeapSnapshot snapshot = read_snapshot_file(load_path_);
    snapshot.name = name_;
    SnapshotReport report{"load", load_path_, {snapshot_info(snapshot)}, {}};
    store.save(std::move(snapshot));
    return report;
  }

  std::string verb_, name_, load_path_, save_path_;
  std::size_t count_ = kDiffRows;
  std::size_t samples_ = kDiffSamplesPerType;
};

// `diff OLD`: `snapshot diff` with the snapshot of an earlier core.
class DiffCommand final : public Command {
 public:
  void add_options(CLI::App& app) override {
    add_core_positionals(app, series_, {"OLD", "The earlier core of the same program"},
                         {"CORES", "OLD NEW: the earlier core of the program, then the core analysed"}, 1, 1);
    add_diff_options(app, count_, samples_, "");
    app.add_option("--by", by_,
                   "The first table per type, or per allocation site (estimated bytes, from the allocator's own "
                   "sampling)")
        ->check(CLI::IsMember({"type", "site"}))
        ->capture_default_str();
  }

  Report run(Session& s) override {
    SnapshotStore::Ptr old = s.snapshots().find(series_.names.front());
    if (!old) throw AnalysisError("the snapshot of " + series_.cores.front() + " was not saved");
    DiffOptions options = diff_options(count_, samples_);
    options.by_site = by_ == "site";
    return diff_with_current(s, *old, take_snapshot(s, current_state_name(s)), options);
  }
  CoreSeries* core_series() override { return &series_; }

 private:
  CoreSeries series_ = CoreSeries::given_as_positionals(/*order_by_time=*/false);
  std::size_t count_ = kDiffRows;
  std::size_t samples_ = kDiffSamplesPerType;
  std::string by_ = "type";
};

class EvolutionCommand final : public Command {
 public:
  void add_options(CLI::App& app) override {
    add_core_positionals(app, series_,
                         {"CORE", "Earlier cores of the same program, taken in the order they were written (after "
                                  "the snapshots saved so far)"},
                         {"CORE", "Cores of one program, taken in the order they were written; the last is the one "
                                  "analysed"},
                         0, 0);
    app.add_flag_callback("--keep-order", [this] { series_.order_by_time = false; },
                          "Take the cores in the order given, not by their files' times");
    app.add_option("-n,--count", count_, "How many types to follow (0: all); steady growers come first")
        ->check(whole_number())
        ->capture_default_str();
    app.add_option("--by", by_,
                   "The other types by bytes at the last point (final) or by growth since the first; or allocation "
                   "sites (estimated bytes, from the allocator's own sampling) by growth (site)")
        ->check(CLI::IsMember({"final", "growth", "site"}))
        ->capture_default_str();
  }

  Report run(Session& s) override {
    return build_session_evolution(s, by_ == "growth" ? EvolutionOrder::growth : EvolutionOrder::final_bytes, count_,
                                   by_ == "site");
  }
  CoreSeries* core_series() override { return &series_; }

 private:
  CoreSeries series_ = CoreSeries::given_as_positionals(/*order_by_time=*/true);
  std::size_t count_ = kEvolutionTypes;
  std::string by_ = "final";
};

}  // namespace

std::unique_ptr<Command> make_snapshot_command() { return std::make_unique<SnapshotCommand>(); }
std::unique_ptr<Command> make_evolution_command() { return std::make_unique<EvolutionCommand>(); }
std::unique_ptr<Command> make_diff_command() { return std::make_unique<DiffCommand>(); }

}  // namespace heapscope
