// The problems an allocator walk meets, each both a finding of `verify` and a warning of the walk: at most
// kMaxFindings findings (the rest counted as dropped), at most kMaxWarningsOfAKind warnings of one kind (the
// rest summed up at the end). Shared by the walkers whose checks are their `verify` (mimalloc's, musl's).
#pragma once

#include <cstddef>
#include <string>
#include <unordered_map>
#include <vector>

#include "heap/heap_check.h"

namespace heapscope {

class WalkProblems {
 public:
  static constexpr std::size_t kMaxFindings = 1000;
  static constexpr std::size_t kMaxWarningsOfAKind = 8;

  // `allocator` starts each warning ("mimalloc", "musl").
  explicit WalkProblems(std::string allocator) : allocator_(std::move(allocator)) {}

  // Records `finding` in `verification`, and as "<allocator> <where> at 0x…: <found> (expected …); <affects>"
  // in `warnings` while its kind has had fewer than its share.
  void add(HeapFinding finding, HeapVerification& verification, std::vector<std::string>& warnings);

  // "… and N more warnings like the above (kind)" for each kind that had more than its share.
  void add_suppressed(std::vector<std::string>& warnings) const;

 private:
  std::string allocator_;
  std::unordered_map<std::string, std::size_t> warnings_of_, suppressed_;
};

}  // namespace heapscope
