#include "queries/snapshot_diff.h"

#include <algorithm>
#include <map>
#include <unordered_map>

#include "queries/block_refs.h"
#include "queries/retention_paths.h"
#include "base/phase_timer.h"

namespace heapscope {

namespace {

std::int64_t signed_difference(std::uint64_t after, std::uint64_t before) {
  return static_cast<std::int64_t>(after) - static_cast<std::int64_t>(before);
}

bool grows_more(const DiffRow& a, const DiffRow& b) {
  if (a.delta_bytes != b.delta_bytes) return a.delta_bytes > b.delta_bytes;
  if (a.delta_count != b.delta_count) return a.delta_count > b.delta_count;
  return a.name < b.name;
}

// Rows keyed by name, in first-seen order; then sorted by growth and cut to `count` (0: all).
class DiffTable {
 public:
  DiffRow& row(const std::string& name, const std::string& kind) {
    auto [it, fresh] = index_.try_emplace(name, rows_.size());
    if (fresh) rows_.push_back(DiffRow{name, kind});
    return rows_[it->second];
  }

  std::vector<DiffRow> finish(std::size_t count, std::uint64_t* total) {
    for (DiffRow& r : rows_) {
      r.delta_count = signed_difference(r.after_count, r.before_count);
      r.delta_bytes = signed_difference(r.after_bytes, r.before_bytes);
    }
    std::sort(rows_.begin(), rows_.end(), grows_more);
    *total = rows_.size();
    if (count && rows_.size() > count) rows_.resize(count);
    return std::move(rows_);
  }

 private:
  std::vector<DiffRow> rows_;
  std::unordered_map<std::string, std::size_t> index_;
};

// Per type, or per allocation site (`totals`: HeapSnapshot::types or ::sites).
std::vector<DiffRow> type_rows(const HeapSnapshot& before, const HeapSnapshot& after, std::size_t count,
                               std::uint64_t* total,
                               std::vector<SnapshotTypeTotal> HeapSnapshot::*totals = &HeapSnapshot::types) {
  DiffTable table;
  for (const SnapshotTypeTotal& t : before.*totals) {
    DiffRow& r = table.row(t.type, "");
    r.before_count = t.count;
    r.before_bytes = t.bytes;
  }
  for (const SnapshotTypeTotal& t : after.*totals) {
    DiffRow& r = table.row(t.type, "");
    r.after_count = t.count;
    r.after_bytes = t.bytes;
  }
  return table.finish(count, total);
}

std::vector<DiffRow> root_rows(const HeapSnapshot& before, const HeapSnapshot& after, std::size_t count,
                               std::uint64_t* total) {
  DiffTable table;
  for (const SnapshotRootTotal& t : before.roots) {
    DiffRow& r = table.row(t.root, t.kind);
    r.before_count = t.blocks;
    r.before_bytes = t.bytes;
  }
  for (const SnapshotRootTotal& t : after.roots) {
    DiffRow& r = table.row(t.root, t.kind);
    r.after_count = t.blocks;
    r.after_bytes = t.bytes;
  }
  return table.finish(count, total);
}

// For each type of `before`, the index of the type of the same name in `after` (kNoType when it has none).
constexpr std::uint32_t kNoType = 0xffffffffu;
std::vector<std::uint32_t> translate_types(const HeapSnapshot& before, const HeapSnapshot& after) {
  std::unordered_map<std::string_view, std::uint32_t> in_after;
  for (std::uint32_t t = 0; t < after.types.size(); ++t) in_after.emplace(after.types[t].type, t);
  std::vector<std::uint32_t> out(before.types.size(), kNoType);
  for (std::uint32_t t = 0; t < before.types.size(); ++t)
    if (auto it = in_after.find(before.types[t].type); it != in_after.end()) out[t] = it->second;
  return out;
}

// Walks both block lists in address order (a merge), counting new and gone blocks per type.
void compare_addresses(const HeapSnapshot& before, const HeapSnapshot& after, const DiffOptions& options,
                       DiffReport& report, std::vector<Address>* sample_addresses) {
  const std::vector<std::uint32_t> translated = translate_types(before, after);
  std::vector<AddressDiffRow> new_rows(after.types.size()), gone_rows(before.types.size());
  std::vector<std::vector<Address>> samples(after.types.size());
  auto count_new = [&](const SnapshotBlock& b) {
    AddressDiffRow& row = new_rows[b.type()];
    ++row.new_count;
    row.new_bytes += b.usable_size();
    ++report.new_blocks;
    report.new_bytes += b.usable_size();
    if (samples[b.type()].size() < options.samples_per_type) samples[b.type()].push_back(b.address);
  };
  auto count_gone = [&](const SnapshotBlock& b) {
    AddressDiffRow& row = gone_rows[b.type()];
    ++row.gone_count;
    row.gone_bytes += b.usable_size();
    ++report.gone_blocks;
    report.gone_bytes += b.usable_size();
  };
  auto old_block = before.blocks.begin();
  auto new_block = after.blocks.begin();
  while (old_block != before.blocks.end() || new_block != after.blocks.end()) {
    if (new_block == after.blocks.end() || (old_block != before.blocks.end() && old_block->address < new_block->address)) {
      count_gone(*old_block++);
    } else if (old_block == before.blocks.end() || new_block->address < old_block->address) {
      count_new(*new_block++);
    } else {
      const bool same = old_block->size_units == new_block->size_units &&
                        (old_block->type_and_flag & SnapshotBlock::kFlagBits) ==
                            (new_block->type_and_flag & SnapshotBlock::kFlagBits) &&
                        translated[old_block->type()] == new_block->type();
      if (same) {
        ++report.kept_blocks;
      } else {
        count_gone(*old_block);
        count_new(*new_block);
      }
      ++old_block;
      ++new_block;
    }
  }

  // One row per type name: new blocks by the later snapshot's types, gone ones by the earlier's.
  std::map<std::string, AddressDiffRow> by_name;
  for (std::uint32_t t = 0; t < after.types.size(); ++t)
    if (new_rows[t].new_count) {
      AddressDiffRow& row = by_name[after.types[t].type];
      row.new_count += new_rows[t].new_count;
      row.new_bytes += new_rows[t].new_bytes;
    }
  for (std::uint32_t t = 0; t < before.types.size(); ++t)
    if (gone_rows[t].gone_count) {
      AddressDiffRow& row = by_name[before.types[t].type];
      row.gone_count += gone_rows[t].gone_count;
      row.gone_bytes += gone_rows[t].gone_bytes;
    }
  // Net growth per type name, new bytes less gone ones: a type that churns (790 new, 776 gone) did not grow.
  std::map<std::string, std::int64_t> net_growth;
  for (const auto& [name, row] : by_name)
    net_growth[name] = static_cast<std::int64_t>(row.new_bytes) - static_cast<std::int64_t>(row.gone_bytes);
  for (auto& [name, row] : by_name) {
    row.type = name;
    report.new_by_type.push_back(std::move(row));
  }
  std::stable_sort(report.new_by_type.begin(), report.new_by_type.end(),
                   [](const AddressDiffRow& a, const AddressDiffRow& b) {
                     return a.new_bytes != b.new_bytes ? a.new_bytes > b.new_bytes : a.new_count > b.new_count;
                   });

  if (sample_addresses) {
    // Sampled: the new blocks of the types with the largest net growth, and of no type that did not grow.
    auto net = [&](std::uint32_t t) { return net_growth[after.types[t].type]; };
    std::vector<std::uint32_t> sampled_types;
    for (std::uint32_t t = 0; t < after.types.size(); ++t)
      if (new_rows[t].new_count && net(t) > 0) sampled_types.push_back(t);
    std::stable_sort(sampled_types.begin(), sampled_types.end(),
                     [&](std::uint32_t a, std::uint32_t b) { return net(a) > net(b); });
    if (sampled_types.size() > kSampledTypes) sampled_types.resize(kSampledTypes);
    for (std::uint32_t t : sampled_types)
      sample_addresses->insert(sample_addresses->end(), samples[t].begin(), samples[t].end());
  }
  if (options.count && report.new_by_type.size() > options.count) report.new_by_type.resize(options.count);
}

}  // namespace

SnapshotInfo snapshot_info(const HeapSnapshot& s) {
  return {s.name, s.target, s.pid, s.capture_time_ns, s.in_use_blocks, s.in_use_bytes, s.types.size(), s.roots.size()};
}

DiffReport diff_snapshots(const HeapSnapshot& before, const HeapSnapshot& after, const DiffOptions& options,
                          std::vector<Address>* sample_addresses) {
  PhaseTimer timer("snapshot diff");
  DiffReport report;
  report.before = snapshot_info(before);
  report.after = snapshot_info(after);
  if (options.by_site) {
    for (const HeapSnapshot* s : {&before, &after}) require_sites(*s);
    report.by = "site";
  }
  report.types = type_rows(before, after, options.count, &report.type_count,
                           options.by_site ? &HeapSnapshot::sites : &HeapSnapshot::types);
  report.roots = root_rows(before, after, options.count, &report.root_count);
  report.addresses_compared = options.compare_addresses;
  if (options.compare_addresses) compare_addresses(before, after, options, report, sample_addresses);
  return report;
}

DiffReport diff_with_current(Session& s, const HeapSnapshot& before, const HeapSnapshot& now, DiffOptions options) {
  options.compare_addresses = before.pid != 0 && before.pid == now.pid;
  std::vector<Address> sample_addresses;
  DiffReport report = diff_snapshots(before, now, options, &sample_addresses);
  if (!options.compare_addresses)
    report.warnings.push_back(
        "the snapshots are of different processes (pid " + std::to_string(before.pid) + " and " +
        std::to_string(now.pid) + "): compared per type and per root only, not address by address");
  const BlockIndex& index = s.graph().index();
  for (Address address : sample_addresses) {
    const BlockId b = index.find(address);
    if (b == kNoBlock) continue;
    report.samples.push_back({block_ref(s, b), shortest_retainer_path(s, b)});
  }
  add_snapshot_warnings(before, s.warnings(), report.warnings);
  return report;
}

}  // namespace heapscope
