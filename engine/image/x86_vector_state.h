// The layouts in which the kernel hands out a thread's SSE/AVX registers, decoded into VectorRegisters
// for every image source that reads them raw: the FXSAVE area (NT_PRFPREG in cores, PTRACE_GETFPREGS:
// struct user_fpregs_struct) and the XSAVE area in its standard format (NT_X86_XSTATE in cores,
// PTRACE_GETREGSET with NT_X86_XSTATE).
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "image/image.h"

namespace heapscope {

inline constexpr std::size_t kFxsaveAreaSize = 512;
// The legacy area plus the XSAVE header: the least an XSAVE area holds.
inline constexpr std::size_t kXsaveMinimumSize = 576;

// xmm0-15 from an FXSAVE area. False, with `problem` saying why, when the area is not 512 bytes.
bool decode_fxsave(std::span<const std::byte> area, VectorRegisters& out, std::string* problem);

// xmm0-15 and, when the area holds AVX state, ymm0-15's upper halves. Components the header marks as in
// their initial state are zero, as the hardware would load them. Returns whether any register was
// decoded (false: the area is shorter than its header); `problem` says what could not be decoded (also an
// area too short for the AVX state it claims: then only xmm0-15 are).
bool decode_xsave(std::span<const std::byte> area, VectorRegisters& out, std::string* problem);

}  // namespace heapscope
