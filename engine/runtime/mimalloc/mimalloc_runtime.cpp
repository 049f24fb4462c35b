#include "runtime/mimalloc/mimalloc_runtime.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <map>

#include "runtime/module_data.h"

namespace heapscope::mimalloc {

namespace {

constexpr const char* kHeapMainSymbol = "_mi_heap_main";
constexpr const char* kStatsMainSymbol = "_mi_stats_main";
// A process's segments: beyond this many the scan stops (2 TiB of 32 MiB segments).
constexpr std::size_t kMaxSegments = std::size_t{1} << 16;

std::string version_text(unsigned v) { return fmt::format("{}.{}.{}", v / 100, v / 10 % 10, v % 10); }

// Every 32 MiB boundary of readable memory whose header looks like a segment's, with its cookie key
// (address xor cookie); huge segments are skipped over whole.
std::vector<std::pair<Segment, std::uint64_t>> scan_segments(const Image& image, const Layout& layout,
                                                             std::vector<std::string>& warnings) {
  std::vector<std::pair<Segment, std::uint64_t>> found;
  Address next = 0;  // the end of the last segment found: nothing inside it is a header
  for (const MemoryRegion& r : image.regions()) {
    if (!r.readable) continue;
    for (Address at = std::max((r.start + kSegmentBytes - 1) & ~(kSegmentBytes - 1), next);
         at < r.end && at >= r.start; at += kSegmentBytes) {
      if (at < next) continue;
      std::uint64_t key = 0;
      const auto segment = read_segment_header(image, layout, at, &key);
      if (!segment) continue;
      if (found.size() >= kMaxSegments) {
        warnings.push_back(fmt::format("more than {} mimalloc segments; the rest are not walked", kMaxSegments));
        return found;
      }
      found.emplace_back(*segment, key);
      next = (segment->end() + kSegmentBytes - 1) & ~(kSegmentBytes - 1);  // a huge segment ends off the grid
      if (next <= at) break;  // wrapped: a damaged size
    }
  }
  return found;
}

}  // namespace

bool is_mimalloc(const Module& module, const SymbolIndex& symbols) {
  return symbols.address_of(module, "mi_version") && symbols.address_of(module, "mi_malloc");
}

std::optional<unsigned> read_version(const Image& image, const SymbolIndex& symbols, const Module& module) {
  const auto at = symbols.address_of(module, "mi_version");
  std::uint8_t code[6];
  if (!at || !image.read_exact(*at, code, sizeof code)) return std::nullopt;
  if (code[0] != 0xb8 || code[5] != 0xc3) return std::nullopt;  // mov $imm32, %eax; ret
  return u32_at(code, 1);
}

std::optional<Segment> read_segment_header(const Image& image, const Layout& layout, Address at, std::uint64_t* cookie) {
  const SegmentLayout& sl = layout.segment;
  std::uint8_t header[264 + 80];
  static_assert(sizeof header >= 264 + 80);
  if (!image.read_exact(at, header, sl.slices + layout.page.size)) return std::nullopt;
  Segment s;
  s.address = at;
  s.used = u64_at(header, sl.used);
  s.abandoned = u64_at(header, sl.abandoned);
  s.slices = u64_at(header, sl.segment_slices);
  s.info_slices = u64_at(header, sl.segment_info_slices);
  s.kind = u32_at(header, sl.kind);
  s.slice_entries = u64_at(header, sl.slice_entries);
  s.thread_id = u64_at(header, sl.thread_id);
  if (s.info_slices == 0 || s.info_slices > SegmentLayout::kMaxInfoSlices) return std::nullopt;
  if (s.kind == SegmentLayout::kNormal) {
    if (s.slices != kSlicesPerSegment) return std::nullopt;
  } else if (s.kind == SegmentLayout::kHuge) {
    // Up to the largest block a block's 32-bit size units can hold.
    if (s.slices <= s.info_slices || s.slices > (Block::kMaxBareBytes >> kSliceShift)) return std::nullopt;
  } else {
    return std::nullopt;
  }
  const std::uint64_t entries = std::min(s.slices, kSlicesPerSegment);
  if (s.slice_entries != entries && s.slice_entries + 1 != entries) return std::nullopt;  // -1: MI_SECURE's guard
  if (s.used > kSlicesPerSegment || s.abandoned > s.used) return std::nullopt;
  // The first page is the header's own slices.
  const std::uint8_t* first = header + sl.slices;
  if (u32_at(first, layout.page.slice_count) != s.info_slices || u32_at(first, layout.page.slice_offset) != 0 ||
      u32_at(first, layout.page.xblock_size) != s.info_slices * kSliceBytes)
    return std::nullopt;
  std::uint64_t mask[SegmentLayout::kCommitMaskWords];
  std::memcpy(mask, header + sl.commit_mask, sizeof mask);
  for (std::uint64_t w : mask) s.committed_bytes += std::uint64_t(std::popcount(w)) * kSliceBytes;
  *cookie = u64_at(header, sl.cookie) ^ at;
  return s;
}

bool is_main_stats(const Image& image, const Layout& layout, Address at) {
  const StatsLayout& st = layout.stats;
  std::int64_t counts[StatsLayout::kCounts][4];
  if (!image.read_exact(at, counts, sizeof counts)) return false;
  for (const auto& c : counts)
    if (c[0] < 0 || c[1] < 0 || c[0] - c[1] != c[3] || c[2] < c[3]) return false;
  auto current = [&](std::uint64_t offset) { return counts[offset / StatsLayout::kCountBytes][3]; };
  // (Not the thread count: mimalloc 2.0.9 uncounts a thread twice when it ends, so it can read 0 with
  // threads alive.)
  return current(st.reserved) > 0 && current(st.committed) > 0 && current(st.committed) <= current(st.reserved);
}

std::optional<Runtime> locate_runtime(const Image& image, const SymbolIndex& symbols, const Module& module,
                                      std::string* error) {
  Runtime rt;
  rt.module = &module;
  rt.layout = &layout_2_0_9();
  const auto version = read_version(image, symbols, module);
  if (version) rt.version = version_text(*version);
  if (version && *version / 100 != kKnownVersion / 100) {
    *error = fmt::format("mimalloc {} is not supported: heapscope reads mimalloc {}'s segments and pages (the "
                         "layout of mimalloc 2.x)",
                         rt.version, version_text(kKnownVersion));
    return std::nullopt;
  }
  if (!version)
    rt.warnings.push_back(fmt::format("cannot tell the mimalloc release of {} (mi_version unreadable); its "
                                      "structures are read with {}'s layout and accepted only where they check out",
                                      module.path, version_text(kKnownVersion)));
  else if (*version != kKnownVersion)
    rt.warnings.push_back(fmt::format("mimalloc {} is not the release heapscope knows ({}); its structures are read "
                                      "with that release's layout and accepted only where they check out",
                                      rt.version, version_text(kKnownVersion)));

  // The main heap by its symbol, when the library has one: its cookie names every segment.
  std::optional<std::uint64_t> main_cookie;
  if (const auto heap = symbols.address_of(module, kHeapMainSymbol)) {
    rt.main_heap = *heap;
    rt.discovery.push_back({"_mi_heap_main", *heap, "symbol"});
    if (const auto c = image.read_u64(*heap + rt.layout->heap.cookie); c && *c) main_cookie = *c;
  }

  // The segments: every header that checks out, then those that agree on the cookie.
  auto candidates = scan_segments(image, *rt.layout, rt.warnings);
  if (!main_cookie && !candidates.empty()) {
    std::map<std::uint64_t, std::size_t> votes;
    for (const auto& [segment, key] : candidates) ++votes[key];
    main_cookie = std::max_element(votes.begin(), votes.end(), [](const auto& a, const auto& b) {
                    return a.second < b.second;
                  })->first;
  }
  std::size_t strangers = 0;
  for (const auto& [segment, key] : candidates) {
    if (key != main_cookie) {
      ++strangers;
      continue;
    }
    rt.segments.push_back(segment);
  }
  rt.segments_missing = strangers != 0;
  if (strangers)
    rt.warnings.push_back(fmt::format("{} places look like mimalloc segment headers but do not carry this process's "
                                      "cookie; they are not walked (another mimalloc instance, or stale memory)",
                                      strangers));
  rt.cookie = main_cookie.value_or(0);
  if (!rt.segments.empty())
    rt.discovery.push_back({"segments", rt.segments.front().address,
                            fmt::format("scan of 32 MiB boundaries, cookie-checked ({} segments)", rt.segments.size())});

  // mimalloc's own statistics.
  if (const auto stats = symbols.address_of(module, kStatsMainSymbol); stats && is_main_stats(image, *rt.layout, *stats)) {
    rt.stats_main = *stats;
    rt.discovery.push_back({"_mi_stats_main", *stats, "symbol, checked"});
  } else if (const ModuleSymbols* syms = symbols.symbols_for(module)) {
    const auto found = scan_writable(
        image, writable_ranges(module, *syms), [](Address, std::uint64_t w) { return static_cast<std::int64_t>(w) >= 0; },
        [&](Address at) { return is_main_stats(image, *rt.layout, at); });
    if (found) {
      rt.stats_main = *found;
      rt.discovery.push_back({"_mi_stats_main", *found, "scan, checked"});
    }
  }
  // Said where it matters, in summary's list of what was found (a warning would repeat it in every command,
  // though only summary's figures need them).
  if (!rt.stats_main)
    rt.discovery.push_back({"_mi_stats_main", 0, "not found: summary shows the walk's figures without mimalloc's own"});
  return rt;
}

}  // namespace heapscope::mimalloc
