/* The sites table: where libheapscope_sites.so keeps the allocation stacks of the blocks it sampled, in an
 * anonymous mapping of the process it runs in, and where heapscope reads them back from a core or a live
 * process (engine/runtime/sites_recorder.h). Nothing is written to disk: the table is in the process's
 * memory, so any core of it, or an attach, has the sites.
 *
 * The layout is fixed-width and versioned, since the reader is another program, perhaps built at another
 * time. The mapping starts with the header, whose magic is how the reader finds it (at a mapping's start,
 * no symbols needed); then the samples, an open-addressing hash set of the sampled blocks that are still
 * allocated (linear probing by hidden block address; a freed block's slot is emptied by shifting its followers
 * back, so there are no tombstones); then the stacks, another hash set, each stack stored once and shared
 * by every sample allocated there; then the filter, counts of live samples per hash bucket of addresses
 * that say "maybe sampled", so that free() on a block never sampled costs a load and no lock.
 *
 * Written under one lock in the process; read without it (a core is a stop, and attach stops the
 * process), so a reader may see a sample whose stack is being written: it checks each stack index and
 * depth against the header's bounds. C, so that the recorder needs no C++ runtime. */
#ifndef HEAPSCOPE_SITES_TABLE_H
#define HEAPSCOPE_SITES_TABLE_H

#include <stdint.h>

#define HS_SITES_LIBRARY "libheapscope_sites.so"  /* the recorder's file name */
#define HS_SITES_MAGIC "heapscope-sites"  /* 15 characters and a NUL: the header's first 16 bytes */
#define HS_SITES_VERSION 1u
#define HS_SITES_MAX_FRAMES 32u           /* return addresses kept per stack, innermost first */
#define HS_SITES_EMPTY 0u                 /* a free sample slot's hidden_address */
#define HS_SITES_NO_STACK 0xffffffffu     /* a sample whose stack did not fit in the stacks table */

struct hs_sites_header {
  char magic[16];
  uint32_t version;
  uint32_t header_bytes;       /* sizeof(struct hs_sites_header) */
  uint64_t mapping_bytes;      /* the whole mapping: header, samples, stacks, filter */
  uint64_t mean_interval;      /* mean bytes allocated between two samples; 1: every allocation */
  uint64_t sample_slots;       /* capacity of the samples set (a power of two) */
  uint64_t stack_slots;        /* capacity of the stacks set (a power of two) */
  uint64_t filter_bytes;       /* the far half of the recorder's filter (heapscope_sites.c): counts, read by no reader */
  uint64_t samples_offset;     /* from the mapping's start */
  uint64_t stacks_offset;
  uint64_t filter_offset;
  uint64_t start_time_ns;      /* CLOCK_REALTIME when the table was made; samples' times are after it */
  uint32_t pid;                /* the process that made the table (a forked child keeps its parent's) */
  uint32_t max_frames;         /* HS_SITES_MAX_FRAMES */
  /* Counters, updated under the lock. */
  uint64_t samples_live;       /* occupied sample slots */
  uint64_t samples_taken;      /* every sample ever taken, freed ones included */
  uint64_t samples_dropped;    /* samples not kept: the samples set was full */
  uint64_t stacks_used;        /* occupied stack slots */
  uint64_t stacks_dropped;     /* samples kept without a stack: the stacks set was full */
};

struct hs_sites_sample {
  /* The block's user pointer complemented (~address), so that the table holds no pointer into the heap:
   * a conservative scanner (heapscope's, valgrind's, LeakSanitizer's) would otherwise find every sampled
   * block reachable from it. HS_SITES_EMPTY for a free slot. */
  uint64_t hidden_address;
  uint64_t requested;          /* bytes the program asked for */
  uint64_t time_ns;            /* nanoseconds after start_time_ns (CLOCK_MONOTONIC differences) */
  uint32_t stack;              /* index into the stacks set, or HS_SITES_NO_STACK */
  uint32_t thread;             /* the allocating thread's id (gettid) */
};

struct hs_sites_stack {
  uint64_t hash;               /* of the frames; 0 for a free slot (a real hash of 0 is stored as 1) */
  uint32_t depth;              /* frames used, at most max_frames */
  uint32_t reserved;
  uint64_t frames[HS_SITES_MAX_FRAMES];  /* return addresses, the allocating call's caller first */
};

#endif
