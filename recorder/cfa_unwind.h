/* A stack walker for the recorder's samples that reads only what a return-address walk needs from each
 * module's .eh_frame (the rule for the frame's CFA, where %rbp was saved) and keeps that rule per return
 * address, so that a stack walked before costs a few table lookups: libgcc's _Unwind_Backtrace parses the
 * CIE and FDE of every frame on every walk (~3,000 instructions a frame), which at jemalloc's and tcmalloc's
 * sampling rate was most of the recorder's cost. x86-64 only; what it cannot follow (a signal frame, a CFA
 * given by a DWARF expression, a module without .eh_frame_hdr) it declines, and the caller walks with
 * libgcc instead. */
#ifndef HEAPSCOPE_CFA_UNWIND_H
#define HEAPSCOPE_CFA_UNWIND_H

#include <stdint.h>

/* A frame to start from: the return address into it, and the caller-side %rsp and %rbp at that point. */
struct hs_frame {
  uint64_t ip;
  uint64_t rsp;
  uint64_t rbp;
};

/* Fills `frames` (at most `capacity`) with the return addresses from `start` outwards, `start.ip` first.
 * Returns how many, or -1 when a frame has a rule this walker does not follow (nothing usable in
 * `frames` then). Never allocates; safe to call from several threads at once. */
int hs_cfa_backtrace(struct hs_frame start, uint64_t* frames, int capacity);

#endif
