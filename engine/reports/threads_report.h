// Report of the `threads` command: what each live thread keeps alive, and the exited threads glibc
// still holds (their stacks stay mapped until someone joins them) with whatever keeps their pthread_t.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "reports/graph_reports.h"

namespace heapscope {

struct FrameRetention {
  std::uint32_t frame = 0;  // #0 is the innermost
  std::string label;        // "stack of thread 2 (tid 4711) frame #3 process_batch() at worker.cpp:88 variable batch"
  std::string variable;     // empty when the pointers are in no named local
  std::uint64_t retained = 0;
};

struct LiveThreadRow {
  std::uint32_t tid = 0;
  std::string name;                        // may be empty
  Address stack_start = 0, stack_end = 0;  // the mapping holding its stack pointer; 0 when none
  std::uint64_t retained = 0;              // usable bytes of the blocks only this thread keeps alive: its
                                           // stack, registers and TLS, each alone or between them
  std::uint64_t stack_retained = 0;        // usable bytes of the blocks only its stack keeps alive
  std::uint64_t registers_retained = 0;    // ... only its registers
  std::uint64_t tls_retained = 0;          // ... only its static TLS and thread descriptor (with the
                                           // thread_local objects and key data its destructors receive), or
                                           // its dynamic TLS
  // The stack's share per local variable, and per frame where the frame keeps more than its variables
  // do; largest first.
  std::vector<FrameRetention> frames;
};

struct ExitedThreadRow {
  Address pthread = 0;                     // the descriptor: the pthread_t value
  Address stack_start = 0, stack_end = 0;  // its stack mapping, still mapped
  bool in_stack_cache = false;             // detached or joined: glibc keeps the stack for reuse
  std::uint64_t descriptor_retained = 0;   // what the descriptor alone keeps alive (DTV, TLS blocks)
  std::uint64_t holders = 0;               // how many places hold its pthread_t
};

// A place holding pthread_t values of exited threads: a heap block or a root word.
struct HandleHolder {
  std::optional<BlockRef> block;
  std::optional<RetainerPath> path;  // block: the shortest path from a root to it
  std::string retained_by;           // block: the root that alone keeps it alive (dominator tree); empty
                                     // when several roots do, or none (leaked)
  std::optional<RootRef> root;
  std::vector<Address> handles;      // the pthread_t values it holds
  std::uint64_t stack_bytes = 0;     // Σ stack mapping sizes of those threads
};

// Holders of one type under one root (blocks) or of one label (roots), summed: "std::set node under
// global g_handles: 8 pthread_t of exited threads (8 stacks, 64 MiB mapped)".
struct HandleHolderGroup {
  std::string holder;  // "<type> under <root>" (or the type alone) for blocks, the root's label for roots
  std::uint64_t holders = 0, handles = 0, stack_bytes = 0;
};

struct ThreadsReport {
  std::vector<LiveThreadRow> threads;  // in the image's order
  std::vector<ExitedThreadRow> exited;
  std::uint64_t exited_stack_bytes = 0;         // Σ stack mapping sizes of the exited threads
  std::uint64_t exited_descriptor_retained = 0;  // Σ descriptor_retained
  std::uint64_t unheld_handles = 0;             // exited threads whose pthread_t nothing holds
  std::vector<HandleHolder> holders;            // by number of handles held, most first
  std::vector<HandleHolderGroup> holder_groups; // by stack bytes, most first
  std::vector<std::string> warnings;
};

}  // namespace heapscope
