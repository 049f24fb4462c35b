// Each Python thread's frames, from CPython 3.11 on: the interpreter pushes a function's frame
// (_PyInterpreterFrame: its code, the previous frame, where it is, then its locals and value stack) on the
// thread's data stack, memory of its own outside every heap. A frame's locals are therefore roots, and the
// frame is theirs: "thread 1, python frame handle() at app.py:42, local cache" rather than an anonymous
// mapping. The chain starts at the thread state's current frame (3.11, 3.12: through its _PyCFrame; 3.13:
// directly), the state found where its data stack's fields are (cpython_roots.h); the code object gives the
// function's qualified name, its file, the locals' names (co_localsplusnames) and, through its locations
// table, the line the frame is at. Frames of generators and of frame objects live in heap objects and are
// reached through them; the C stack's entry frames (3.12+) hold nothing.
// Offsets were read from each release's own headers (Include/internal/pycore_frame.h, cpython/pystate.h,
// cpython/code.h) with offsetof.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "heap/heap_model.h"
#include "image/image.h"
#include "runtime/cpython/cpython_roots.h"

namespace heapscope::cpython {

// The frames of every thread whose data stack is in `stacks`, innermost first per thread; none before 3.11
// (frames were heap objects then) or for a release this does not know. A frame that called Python code
// saved its value stack's top: the slots above it, spent, go to `spent` (they are no references).
std::vector<InterpreterFrame> python_frames(const Image& image, const std::vector<DataStack>& stacks, int minor,
                                            std::vector<HeapSegment>& spent);

// The line of code unit `instruction` by a 3.11+ locations table (co_linetable), from `first_line`
// (co_firstlineno); 0 when the table gives none.
std::uint32_t line_of_instruction(std::span<const std::uint8_t> table, std::uint32_t first_line, std::int64_t instruction);

}  // namespace heapscope::cpython
