#include "runtime/walk_problems.h"

#include <fmt/format.h>

namespace heapscope {

void WalkProblems::add(HeapFinding f, HeapVerification& verification, std::vector<std::string>& warnings) {
  if (++warnings_of_[f.kind] > kMaxWarningsOfAKind) {
    ++suppressed_[f.kind];
  } else {
    warnings.push_back(fmt::format("{} {}{}: {} (expected {}); {}", allocator_, f.where,
                                   f.chunk ? fmt::format(" at 0x{:x}", f.chunk) : std::string(), f.found, f.expected,
                                   f.affects));
  }
  if (verification.findings.size() < kMaxFindings) verification.findings.push_back(std::move(f));
  else ++verification.findings_dropped;
}

void WalkProblems::add_suppressed(std::vector<std::string>& warnings) const {
  for (const auto& [kind, count] : suppressed_)
    warnings.push_back(fmt::format("… and {} more warnings like the above ({})", count, kind));
}

}  // namespace heapscope
