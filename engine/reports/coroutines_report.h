// Report of the `coroutines` command: C++20 coroutine frames on the heap per coroutine function, and their
// async stacks (each chain of frames awaiting one another, from the outermost awaiter down), identical
// stacks folded into one row with a count, like SOS's dumpasync.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "reports/graph_reports.h"

namespace heapscope {

struct CoroutineFunctionRow {
  std::string function;  // "process_records(int)"
  std::string module;
  std::string source;    // "pipeline.cpp:88" where DWARF says, else empty
  std::uint64_t frames = 0, bytes = 0;  // bytes: usable sizes of its frame blocks
  std::uint64_t frame_size = 0;         // sizeof its frame type from DWARF; 0 when unknown
  std::string promise_type;             // from DWARF; empty when unknown
  std::vector<std::pair<std::string, std::uint64_t>> suspend_points;  // where its frames wait, most frames first
};

struct AsyncStackFrame {
  std::string function;
  std::string suspend_point;  // "co_await #2 (Task<int>)", "suspend point 1", "final suspend"
  std::uint64_t repeat = 1;   // consecutive frames of this function at this point
};

struct AsyncStack {
  std::uint64_t count = 0;   // identical stacks folded into this row
  std::uint64_t depth = 0;   // frames in one of them
  std::uint64_t bytes = 0;   // usable bytes of all their frames
  std::vector<AsyncStackFrame> frames;  // outermost awaiter first; runs of equal frames folded
  Address outermost = 0, innermost = 0;  // frame addresses of the first of them
  std::string held_by;       // root of the outermost frame's shortest retainer path; empty when leaked
  bool leaked = false;       // no root reaches the outermost frame
};

struct CoroutinesReport {
  std::vector<CoroutineFunctionRow> functions;  // most bytes first
  bool with_stacks = false;
  std::vector<AsyncStack> stacks;               // most bytes first
  std::uint64_t total_frames = 0, total_bytes = 0;
  std::vector<std::string> warnings;
};

}  // namespace heapscope
