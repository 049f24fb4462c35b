// Call stacks of every thread of an Image, unwound with libdw's CFI unwinder over the Image itself (its
// memory reads, thread registers and module list), so a core file, a live process and a debugger frontend
// all get the same frames. Used to label stack roots with the function whose frame holds a pointer.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "dwarf/dwarf_files.h"
#include "image/image.h"
#include "symbols/symbol_index.h"

namespace heapscope {

// A local variable or parameter the frame keeps in its stack memory at [start, end).
struct FrameVariable {
  std::string name;
  Address start = 0, end = 0;
  std::uint64_t type_die = 0;  // .debug_info offset of its type in the module's DWARF; 0 when unknown
};

struct Frame {
  Address pc = 0;        // return address for callers, the current instruction for the innermost frame
  Address sp_low = 0;    // the frame's stack pointer
  Address sp_high = 0;   // the caller's stack pointer (exclusive); for the outermost frame the stack's end
  std::string function;  // demangled; empty when unknown
  std::string module_offset;  // when no symbol covers pc: "clangd+0x12e7a2" (pc less the module's load bias)
  std::string file;      // source file as the line table names it; empty when unknown
  int line = 0;          // 0 when unknown
  bool is_activation = false;  // pc is the current instruction (innermost or signal frame), not a return address
  // Locals and parameters with a frame-base-relative (DW_OP_fbreg) location at pc, from DWARF; empty
  // without debug info and for the outermost frame (whose frame base is unknown).
  std::vector<FrameVariable> variables;

  bool covers(Address a) const { return a >= sp_low && a < sp_high; }
  // "process_batch() at worker.cpp:88"; when the function is unknown, its module and offset
  // ("clangd+0x12e7a2"), or the pc in hex outside every module. C names get "()";
  // demangled C++ names carry their parameter lists already. A source location alone (no pc, no function:
  // an interpreter's traceback): "app.py:31".
  std::string describe() const;
  // The variable whose memory holds `a`, or null.
  const FrameVariable* variable_at(Address a) const {
    for (const FrameVariable& v : variables)
      if (a >= v.start && a < v.end) return &v;
    return nullptr;
  }
};

// Frames of each thread, innermost first, indexed like Image::threads(). A thread whose stack cannot be
// unwound gets what could be read (at least its innermost frame when its registers are usable); problems
// are added to `warnings` (which may be null). Corrupt stacks end a thread's unwind, never the program;
// each thread is limited to kMaxFramesPerThread frames and the whole unwind to a few seconds.
inline constexpr std::size_t kMaxFramesPerThread = 256;
// Frame variables and source lines come from the DWARF `dwarf` opens (shared with the type index).
std::vector<std::vector<Frame>> unwind_threads(const Image& image, const SymbolIndex& symbols,
                                               const DwarfFiles& dwarf, std::vector<std::string>* warnings);

// Frames for return addresses recorded elsewhere (an allocator's sampled allocation stacks), innermost
// first, each named as a thread's caller frame is: function, file:line where DWARF is, module+offset
// otherwise. They have no stack range and no variables.
std::vector<Frame> symbolize_return_addresses(const Image& image, const SymbolIndex& symbols, const DwarfFiles& dwarf,
                                              std::span<const Address> return_addresses);

// The frame of `frames` whose stack range holds `address`, or null; its index is written to `index`.
const Frame* frame_covering(const std::vector<Frame>& frames, Address address, std::size_t* index);

}  // namespace heapscope
