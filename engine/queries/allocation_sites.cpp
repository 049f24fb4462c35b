#include "queries/allocation_sites.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "base/progress.h"
#include "model/collector_reach.h"
#include "queries/leak_report.h"

namespace heapscope {

namespace {

constexpr std::uint32_t kNoSite = ~std::uint32_t{0};

SiteFrame site_frame(const Frame& f) {
  return {f.pc, f.function, f.file, f.line, f.module_offset, f.describe()};
}

// "512 KiB", "1 MiB", "4096 bytes": a sampling interval as people say it.
std::string interval_text(std::uint64_t bytes) {
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return fmt::format("{} MiB", bytes >> 20);
  if (bytes >= 1024 && bytes % 1024 == 0) return fmt::format("{} KiB", bytes >> 10);
  return fmt::format("{} bytes", bytes);
}

// The sentence of a heap whose blocks have no site at all: what to do about it.
std::string without_sites(const Provenance& p) {
  if (!p.supported)
    return "no allocation sites: " + (p.how_to_enable.empty() ? std::string("this allocator keeps no allocation stacks "
                                                                           "heapscope can read (jemalloc started with "
                                                                           "MALLOC_CONF=prof:true does)")
                                                              : p.how_to_enable);
  if (p.enabled == false) return fmt::format("no allocation sites: {} is off in this process; {}", p.source, p.how_to_enable);
  // On, but no block of this heap was sampled: at a rate, a small heap may hold no sample at all.
  const std::string rate = p.mean_interval && *p.mean_interval > 1
                               ? fmt::format(", sampling once per {} allocated on average,", interval_text(*p.mean_interval))
                               : std::string();
  if (p.exact()) return fmt::format("no allocation sites: {} sampled every allocation, and none is a block of this heap", p.source);
  return fmt::format("no allocation sites: {} was on{} and sampled none of this heap's blocks (a small heap holds few "
                     "samples); {}",
                     p.source, rate, p.how_to_sample_all.empty() ? p.how_to_enable : p.how_to_sample_all);
}

// A row per site (in the provenance's order, most bytes first), then the blocks without one.
template <class Row>
struct SiteRows {
  std::vector<Row> rows;
  Row none;
  Row& of(std::uint32_t site) { return site == kNoSite ? none : rows[site]; }
};

template <class Row>
SiteRows<Row> site_rows(const Provenance& p) {
  SiteRows<Row> out;
  out.rows.resize(p.sites.size());
  for (std::uint32_t i = 0; i < p.sites.size(); ++i) out.rows[i].site = site_ref(p, i);
  return out;
}

// Each block's site in block order, walked alongside a loop over block ids that only grow.
class SiteCursor {
 public:
  explicit SiteCursor(const Provenance& p) : p_(p) {}
  std::uint32_t site_of(BlockId b) {
    while (next_ < p_.blocks.size() && p_.blocks[next_].block < b) ++next_;
    return next_ < p_.blocks.size() && p_.blocks[next_].block == b ? p_.blocks[next_].site : kNoSite;
  }

 private:
  const Provenance& p_;
  std::size_t next_ = 0;
};

// Rows with blocks, most bytes first (estimated when sampled at a rate); the row without a site last.
template <class Row>
std::vector<Row> ordered(SiteRows<Row>& t, std::uint64_t Row::*count, bool exact) {
  std::vector<Row> out;
  for (Row& r : t.rows)
    if (r.*count) out.push_back(std::move(r));
  std::stable_sort(out.begin(), out.end(), [exact](const Row& a, const Row& b) {
    return exact ? a.bytes > b.bytes : a.estimated_bytes > b.estimated_bytes;
  });
  if (t.none.*count) out.push_back(std::move(t.none));
  return out;
}

double weight_of(const Provenance& p, std::uint64_t bytes) { return unsampling_weight(bytes, p.mean_interval.value_or(1)); }

}  // namespace

AllocatedAt site_ref(const Provenance& p, std::uint32_t site, std::size_t max_frames) {
  AllocatedAt a;
  a.site = site;
  const std::vector<Frame>& frames = p.sites[site].frames;
  const std::size_t shown = max_frames == 0 ? frames.size() : std::min(max_frames, frames.size());
  for (std::size_t i = 0; i < shown; ++i) a.frames.push_back(site_frame(frames[i]));
  a.more_frames = frames.size() - shown;
  a.stack = p.sites[site].stack;
  return a;
}

std::optional<AllocatedAt> allocated_at(Session& s, BlockId block, std::size_t max_frames) {
  const Provenance& p = s.provenance();
  const SampledBlock* sampled = p.of(block);
  if (!sampled) return std::nullopt;
  AllocatedAt a = site_ref(p, sampled->site, max_frames);
  a.requested = sampled->requested;
  return a;
}

SitesNote sites_note(const Provenance& p) {
  SitesNote n;
  n.present = p.present();
  n.exact = p.exact();
  n.source = p.source;
  n.mean_interval = p.mean_interval.value_or(0);
  n.blocks = p.blocks.size();
  n.sites = p.sites.size();
  const std::string counted = fmt::format("{} block{} at {} allocation site{} (histogram --by site)", n.blocks,
                                          n.blocks == 1 ? "" : "s", n.sites, n.sites == 1 ? "" : "s");
  if (!n.present)
    n.summary = without_sites(p).substr(std::string_view("no allocation sites: ").size());
  else if (n.exact)
    n.summary = fmt::format("{}, every allocation sampled: {}", p.source, counted);
  else
    n.summary = fmt::format("{}, sampled once per {}: {}", p.source,
                            p.mean_interval ? interval_text(*p.mean_interval) : std::string("(rate unknown)"), counted);
  if (!n.present)
    n.sentence = without_sites(p);
  else if (n.exact)
    n.sentence = fmt::format("Allocation sites from {}, every allocation sampled: counts are exact.", p.source);
  else if (p.mean_interval)
    n.sentence = fmt::format("Allocation sites from {}, sampled once per {} on average: count and bytes are the "
                             "sampled blocks; the estimates count each as 1/(1-exp(-size/{})) blocks, as jeprof "
                             "does. Blocks without a site were not sampled.",
                             p.source, interval_text(*p.mean_interval), interval_text(*p.mean_interval));
  else
    n.sentence = fmt::format("Allocation sites from {}, at a sampling rate heapscope cannot read: count and bytes "
                             "are the sampled blocks only.", p.source);
  return n;
}

std::string no_site_reason(const Provenance& p, const Block& block) {
  if (std::find(p.other_arenas.begin(), p.other_arenas.end(), block.arena) != p.other_arenas.end())
    return p.other_arenas_why;
  if (!p.supported) return p.how_to_enable.empty() ? std::string() : without_sites(p);
  if (!p.present()) return without_sites(p);
  if (p.exact()) return "no allocation site recorded for this block";
  return p.mean_interval ? fmt::format("not sampled ({} samples once per {} on average)", p.source,
                                       interval_text(*p.mean_interval))
                         : "not sampled";
}

HistogramReport histogram_by_site(Session& s, std::size_t examples) {
  const HeapModel& heap = s.heap();
  const Provenance& p = s.provenance();
  if (!p.present()) throw AnalysisError(without_sites(p));
  const LeakVerdicts& v = s.verdicts();
  HistogramReport r;
  r.by = "site";
  r.sites = sites_note(p);
  SiteRows<HistogramRow> t = site_rows<HistogramRow>(p);
  SiteCursor cursor(p);
  for (BlockId i = 0; i < heap.blocks.size(); ++i) {
    if ((i & kCheckMask) == 0) progress_check();
    const Block& b = heap.blocks[i];
    if (!is_allocated(b.state)) continue;
    ++r.allocated_blocks;
    const std::uint32_t site = cursor.site_of(i);
    HistogramRow& row = t.of(site);
    if (site != kNoSite) ++r.typed_blocks;  // by site: the blocks with a site
    if (row.examples.size() < examples) row.examples.push_back(b.address());
    ++row.count;
    row.bytes += b.usable_size();
    const bool leaked = is_leaked(v.verdict[i]);
    row.leaked_count += leaked;
    row.leaked_bytes += leaked ? b.usable_size() : 0;
    if (site == kNoSite) continue;
    const double w = weight_of(p, b.usable_size());
    row.estimated_count += w;
    row.estimated_bytes += w * static_cast<double>(b.usable_size());
  }
  r.rows = ordered(t, &HistogramRow::count, p.exact());
  return r;
}

LeaksReport leaks_by_site(Session& s, std::size_t examples) {
  const HeapModel& heap = s.heap();
  const Provenance& p = s.provenance();
  if (!p.present()) throw AnalysisError(without_sites(p));
  // The totals, warnings and notes are the leaks report's; only its groups are by site.
  LeaksReport r = build_leaks_report(s, 0);
  r.by = "site";
  r.sites = sites_note(p);
  const LeakVerdicts& v = s.verdicts();
  SiteRows<LeakGroup> t = site_rows<LeakGroup>(p);
  t.none.type = "(no allocation site)";
  SiteCursor cursor(p);
  for (std::size_t k = 0; k < v.leaked.size(); ++k) {  // v.leaked is in block order
    if ((k & kCheckMask) == 0) progress_check();
    const BlockId i = v.leaked[k];
    if (collectable(heap, heap.blocks[i])) continue;  // a collector's garbage: in r.collectable, by type
    const std::uint32_t site = cursor.site_of(i);
    LeakGroup& g = t.of(site);
    const std::uint64_t size = heap.blocks[i].usable_size();
    ++g.count;
    g.bytes += size;
    const Verdict verdict = v.verdict[i];
    g.direct += verdict == Verdict::direct_leak;
    g.indirect += verdict == Verdict::indirect_leak;
    g.cycle += verdict != Verdict::direct_leak && verdict != Verdict::indirect_leak;
    if (verdict != Verdict::indirect_leak && g.examples.size() < examples) g.examples.push_back(heap.blocks[i].address());
    if (site == kNoSite) continue;
    const double w = weight_of(p, size);
    g.estimated_count += w;
    g.estimated_bytes += w * static_cast<double>(size);
  }
  for (LeakGroup& g : t.rows)
    if (g.site && !g.site->frames.empty()) g.type = g.site->frames.front().text;
  r.groups = ordered(t, &LeakGroup::count, p.exact());
  for (LeakGroup& g : r.groups) g.example_texts.assign(g.examples.size(), "");
  return r;
}

}  // namespace heapscope
