// C++20 coroutine frames on the heap. A frame starts with two function pointers, resume then destroy
// (both compilers; the resume slot is null once the coroutine reached its final suspend), and the
// functions they point to are clones the compilers name after the coroutine:
//   GCC:   <coroutine>(<coroutine>::<ramp>.Frame*) [clone .actor] / [clone .destroy]
//   Clang: <coroutine> [clone .resume] / [clone .destroy] / [clone .cleanup]
// so a heap block whose second word is such a destroy clone, and whose first is null or the matching
// resume clone, is a frame of that coroutine. The frame's DWARF type (GCC "<ramp>.Frame", Clang
// "__coro_frame_ty" inside the ramp function) gives the promise, the suspend index and, for GCC, one awaiter
// member per suspend point in order, which names what the frame is waiting for.
//
// Async stacks: a task type's promise keeps the handle of the frame that awaits it (its continuation), so a
// pointer inside a frame's promise to another frame's start links the awaited frame to its awaiter.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "dwarf/dwarf_file.h"
#include "model/block_index.h"
#include "heap/heap_model.h"
#include "image/image.h"
#include "symbols/symbol_index.h"

namespace heapscope {

struct CoroutineLayout {
  std::uint64_t frame_size = 0;          // sizeof the frame type
  std::optional<DwarfMember> promise;    // GCC _Coro_promise, Clang __promise
  std::optional<DwarfMember> index;      // GCC _Coro_resume_index, Clang __coro_index
  std::vector<DwarfMember> awaiters;     // GCC: Is_*, Aw<n>_*, Fs_* in member order (suspend points 2, 4, 6, ...)
};

struct CoroutineFunction {
  enum class Compiler { gcc, clang };
  std::string name;    // the coroutine, demangled: "process_records(int)"
  std::string ramp;    // its mangled name
  std::string module;  // file name of the module that holds its code
  Compiler compiler = Compiler::gcc;
  Address resume = 0, destroy = 0;       // runtime addresses of the clones
  std::optional<CoroutineLayout> layout;  // when DWARF describes the frame
  SourceLocation source;                  // where the coroutine is defined, when DWARF says
};

struct CoroutineFrame {
  static constexpr std::uint32_t kNone = 0xffffffffu;
  BlockId block = kNoBlock;
  Address address = 0;
  std::uint32_t function = 0;        // index into CoroutineFrames::functions
  bool final_suspend = false;        // resume slot null: finished, waiting to be destroyed
  std::optional<std::uint64_t> suspend_index;
  std::uint32_t awaiter = kNone;     // index (in frames) of the frame awaiting this one
};

struct CoroutineFrames {
  std::vector<CoroutineFunction> functions;
  std::vector<CoroutineFrame> frames;  // in block order
  std::vector<std::string> warnings;

  // Where the frame is suspended: "co_await #2 (Task<int>)", "initial suspend", "final suspend",
  // "suspend point 3", or "suspended" when nothing more is known.
  std::string suspend_point(const CoroutineFrame& frame) const;
};

CoroutineFrames find_coroutine_frames(const Image& image, const SymbolIndex& symbols, const HeapModel& heap);

// "_Z4loopi" for GCC's "_Z4loopPZ4loopiE14_Z4loopi.Frame.destroy"; empty when `mangled` is no GCC frame
// clone with that suffix (".destroy" or ".actor").
std::string gcc_coroutine_ramp(const std::string& mangled, std::string_view clone_suffix);

}  // namespace heapscope
