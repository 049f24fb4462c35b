#include "queries/evolution.h"

#include <algorithm>
#include <unordered_map>

#include "queries/snapshot_diff.h"

namespace heapscope {

const char* evolution_order_name(EvolutionOrder by) { return by == EvolutionOrder::growth ? "growth" : "final"; }

bool grows_steadily(std::span<const std::uint64_t> bytes) {
  if (bytes.size() < 3) return false;
  for (std::size_t i = 1; i < bytes.size(); ++i)
    if (bytes[i] <= bytes[i - 1]) return false;
  return true;
}

EvolutionReport build_evolution(std::span<const HeapSnapshot* const> points, EvolutionOrder by, std::size_t count,
                                bool by_site) {
  if (by_site) {
    by = EvolutionOrder::growth;
    for (const HeapSnapshot* p : points) require_sites(*p);
  }
  EvolutionReport report;
  report.by = by_site ? "site" : evolution_order_name(by);
  std::vector<EvolutionSeries> all;
  std::unordered_map<std::string, std::size_t> index;
  for (std::size_t p = 0; p < points.size(); ++p) {
    report.points.push_back(snapshot_info(*points[p]));
    for (const SnapshotTypeTotal& t : by_site ? points[p]->sites : points[p]->types) {
      auto [it, fresh] = index.try_emplace(t.type, all.size());
      if (fresh) {
        all.push_back({t.type, std::vector<std::uint64_t>(points.size(), 0), std::vector<std::uint64_t>(points.size(), 0)});
      }
      all[it->second].bytes[p] += t.bytes;
      all[it->second].counts[p] += t.count;
    }
  }
  for (EvolutionSeries& s : all) {
    s.growth_bytes = s.bytes.empty() ? 0 : static_cast<std::int64_t>(s.bytes.back()) - static_cast<std::int64_t>(s.bytes.front());
    s.steady = grows_steadily(s.bytes);
  }
  std::sort(all.begin(), all.end(), [by](const EvolutionSeries& a, const EvolutionSeries& b) {
    if (a.steady != b.steady) return a.steady;
    if (a.steady || by == EvolutionOrder::growth) {
      if (a.growth_bytes != b.growth_bytes) return a.growth_bytes > b.growth_bytes;
    }
    if (a.bytes.back() != b.bytes.back()) return a.bytes.back() > b.bytes.back();
    return a.type < b.type;
  });
  report.type_count = all.size();
  if (count && all.size() > count) all.resize(count);
  report.series = std::move(all);
  return report;
}

std::string current_state_name(const Session& s) {
  return s.options().state_name.empty() ? "now" : s.options().state_name;
}

EvolutionReport build_session_evolution(Session& s, EvolutionOrder by, std::size_t count, bool by_site) {
  const std::vector<SnapshotStore::Ptr> saved = s.snapshots().all();
  const HeapSnapshot now = take_snapshot(s, current_state_name(s));
  std::vector<const HeapSnapshot*> points;
  for (const SnapshotStore::Ptr& p : saved) points.push_back(p.get());
  points.push_back(&now);
  EvolutionReport report = build_evolution(points, by, count, by_site);
  if (saved.empty())
    report.warnings.push_back("no saved snapshots: save some with `snapshot save NAME` as the program runs");
  const std::vector<std::string> current = s.warnings();
  for (const SnapshotStore::Ptr& p : saved) add_snapshot_warnings(*p, current, report.warnings);
  return report;
}

}  // namespace heapscope
