#include "runtime/jemalloc/jemalloc_prof.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

#include "base/phase_timer.h"
#include "base/progress.h"
#include "runtime/jemalloc/jemalloc_extent_map.h"

namespace heapscope::jemalloc {

namespace {

constexpr std::size_t kMaxWarnings = 8;
constexpr unsigned kMaxLgSample = 62;

class SampleReader {
 public:
  SampleReader(const Image& image, const Runtime& rt) : image_(image), rt_(rt), p_(rt.layout->prof) {}

  AllocationSamples run() {
    out_.supported = true;
    out_.source = "jemalloc heap profiling (prof)";
    out_.how_to_enable = "start the process with MALLOC_CONF=prof:true (prof:true,lg_prof_sample:0 records every "
                         "allocation)";
    out_.how_to_sample_all = "start the process with MALLOC_CONF=prof:true,lg_prof_sample:0 to sample every allocation";
    read_switches();
    if (out_.enabled == false || !rt_.initialized) return std::move(out_);
    PhaseTimer timer("walk: jemalloc profiling samples");
    const bool read = for_each_extent(
        image_, rt_, [&](Address edata, Address page, const LeafEntry& entry) {
          if (!entry.slab && entry.state == ExtentState::active) read_extent(edata, page);
        },
        [&](Address leaf) { warn(fmt::format("extent map leaf 0x{:x} cannot be read; its samples are missing", leaf)); });
    if (!read) warn("jemalloc's extent map cannot be read: no samples were read");
    std::sort(out_.samples.begin(), out_.samples.end(),
              [](const AllocationSample& a, const AllocationSample& b) { return a.block < b.block; });
    if (dropped_) warn(fmt::format("… and {} more sampled extents whose profiling data did not check out", dropped_));
    return std::move(out_);
  }

 private:
  void warn(std::string text) {
    if (out_.warnings.size() < kMaxWarnings) out_.warnings.push_back(std::move(text));
  }

  // je_opt_prof and je_lg_prof_sample, where the runtime placed them.
  void read_switches() {
    if (rt_.opt_prof) {
      std::uint8_t on = 0;
      if (image_.read_exact(rt_.opt_prof, &on, 1) && on <= 1) out_.enabled = on == 1;
    }
    if (rt_.lg_prof_sample && out_.enabled != false)
      if (const auto lg = image_.read_u64(rt_.lg_prof_sample); lg && *lg <= kMaxLgSample)
        out_.mean_interval = std::uint64_t{1} << *lg;
  }

  void read_extent(Address edata, Address page) {
    if (++visited_ % 4096 == 0) progress_check();
    std::uint64_t words[12];
    if (!image_.read_exact(edata, words, sizeof words)) return;  // the walk says so
    const Extent e = decode_extent(words[0], words[1], words[2]);
    if (e.slab || e.state != ExtentState::active || page < e.base() || page >= e.end()) return;
    const Address tctx = words[p_.edata_tctx / 8];
    if (tctx == ProfLayout::kUnsampled || tctx == 0) return;
    const std::optional<std::uint32_t> stack = stack_of(tctx);
    if (!stack) {
      if (++bad_ <= kMaxWarnings)
        warn(fmt::format("extent 0x{:x}: its profiling context 0x{:x} does not lead to a backtrace; its block has "
                         "no allocation site",
                         edata, tctx));
      else
        ++dropped_;
      return;
    }
    AllocationSample s;
    s.block = e.address;
    s.requested = words[p_.edata_alloc_size / 8];
    s.time_ns = words[p_.edata_alloc_time / 8];
    s.stack = *stack;
    out_.samples.push_back(s);
  }

  // The backtrace a prof_tctx_t leads to, checked: its gctx's bt.vec points at the frames kept inline.
  std::optional<std::uint32_t> stack_of(Address tctx) {
    if (tctx % 8) return std::nullopt;
    const auto gctx = image_.read_u64(tctx + p_.tctx_gctx);
    if (!gctx || !*gctx || *gctx % 8) return std::nullopt;
    if (const auto it = stacks_.find(*gctx); it != stacks_.end()) return it->second;
    std::uint64_t bt[2];
    if (!image_.read_exact(*gctx + p_.gctx_bt_vec, bt, sizeof bt)) return std::nullopt;
    const auto length = static_cast<std::uint32_t>(bt[1]);
    if (bt[0] != *gctx + p_.gctx_frames || length == 0 || length > ProfLayout::kMaxFrames) return std::nullopt;
    std::vector<Address> frames(length);
    if (!image_.read_exact(bt[0], frames.data(), frames.size() * 8)) return std::nullopt;
    const auto index = static_cast<std::uint32_t>(out_.stacks.size());
    out_.stacks.push_back(std::move(frames));
    stacks_.emplace(*gctx, index);
    return index;
  }

  const Image& image_;
  const Runtime& rt_;
  const ProfLayout& p_;
  AllocationSamples out_;
  std::unordered_map<Address, std::uint32_t> stacks_;  // gctx → its stack's index
  std::size_t visited_ = 0, bad_ = 0, dropped_ = 0;
};

}  // namespace

AllocationSamples read_allocation_samples(const Image& image, const Runtime& rt) { return SampleReader(image, rt).run(); }

}  // namespace heapscope::jemalloc
