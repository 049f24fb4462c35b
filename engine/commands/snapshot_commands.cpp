// The snapshot commands: `snapshot save|diff|list|drop|load` keep named heap snapshots in the session's
// SnapshotStore (shared by every Session of a debugger target) and compare one with the current state;
// `evolution` shows bytes per type over every saved snapshot and the current state.
#include <fmt/format.h>

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
    app.add_option("-n,--count", count_, "diff: rows per table, most growth first (0: all)")
        ->check(whole_number())
        ->capture_default_str();
    app.add_option("--sample", samples_, "diff: new blocks shown with their retainers, per type of largest net growth (new less gone bytes)")
        ->check(whole_number())
        ->capture_default_str();
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
    DiffOptions options;
    options.count = count_;
    options.samples_per_type = samples_;
    return diff_with_current(s, *saved, take_snapshot(s, current_state_name(s)), options);
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

class EvolutionCommand final : public Command {
 public:
  void add_options(CLI::App& app) override {
    app.add_option("-n,--count", count_, "How many types to follow (0: all); steady growers come first")
        ->check(whole_number())
        ->capture_default_str();
    app.add_option("--by", by_, "The other types by bytes at the last point (final) or by growth since the first")
        ->check(CLI::IsMember({"final", "growth"}))
        ->capture_default_str();
  }

  Report run(Session& s) override {
    return build_session_evolution(s, by_ == "growth" ? EvolutionOrder::growth : EvolutionOrder::final_bytes, count_);
  }

 private:
  std::size_t count_ = kEvolutionTypes;
  std::string by_ = "final";
};

}  // namespace

std::unique_ptr<Command> make_snapshot_command() { return std::make_unique<SnapshotCommand>(); }
std::unique_ptr<Command> make_evolution_command() { return std::make_unique<EvolutionCommand>(); }

}  // namespace heapscope
