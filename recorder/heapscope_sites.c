/* libheapscope_sites.so: samples a glibc program's allocations, as jemalloc's and tcmalloc's heap profilers
 * do, and keeps each sampled block's allocation stack in the process's own memory (recorder/sites_table.h),
 * where heapscope finds it in a core or an attached process. Preloaded:
 *
 *   LD_PRELOAD=/usr/local/lib/heapscope/libheapscope_sites.so PROGRAM     (or `heapscope record -- PROGRAM`)
 *
 * HEAPSCOPE_SAMPLE_BYTES sets the mean number of bytes allocated between two samples (default 512 KiB, as
 * jemalloc's lg_prof_sample:19 and tcmalloc's default; 1 samples every allocation). HEAPSCOPE_SITES_SLOTS
 * sets how many sampled blocks may be live at once (rounded up to a power of two).
 *
 * What it must never do, and how it avoids it:
 * - allocate through malloc: the table is an mmap of its own, made on the first sample; glibc's allocator is
 *   reached through its __libc_* entry points, so no dlsym (which allocates) is needed, and calls made before
 *   any constructor ran (the dynamic linker's, other libraries' constructors') work;
 * - recurse: a thread-local flag sends every allocation made while this thread records a sample (the unwinder
 *   may allocate) straight to glibc; the thread-local variables are initial-exec TLS, which a preloaded
 *   library gets without a call to __tls_get_addr;
 * - deadlock after fork: the lock is taken before fork and released in both processes (pthread_atfork);
 * - grow without bound: the sets are sized once; a full samples set counts what it drops, a full stacks set
 *   keeps the sample without its stack and counts that, and heapscope reports both.
 * A sampled block that is freed or reallocated leaves the table: what is left describes live blocks only. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <unwind.h>

#include "cfa_unwind.h"
#include "sites_table.h"

#define EXPORT __attribute__((visibility("default")))
#define THREAD_LOCAL static __thread __attribute__((tls_model("initial-exec")))

/* glibc's allocator itself, under the names it exports for allocators that wrap it. */
extern void* __libc_malloc(size_t);
extern void __libc_free(void*);
extern void* __libc_calloc(size_t, size_t);
extern void* __libc_realloc(void*, size_t);
extern void* __libc_memalign(size_t, size_t);
extern void* __libc_valloc(size_t);
extern void* __libc_pvalloc(size_t);

enum { kDefaultMeanInterval = 512 * 1024, kDefaultSlots = 1 << 16, kEverySampleSlots = 1 << 20 };

/* The table, once made (null before the first sample, or when it could not be mapped). */
static struct hs_sites_header* table;
static int table_failed;
static uint64_t mean_interval;  /* 0 until read from the environment */
static uint64_t start_monotonic_ns;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

THREAD_LOCAL int recording;              /* this thread is inside the recorder: allocate straight */
THREAD_LOCAL int64_t bytes_until_sample; /* counts down; a sample when it drops to 0 or below */
THREAD_LOCAL uint64_t random_state;      /* xorshift64*, seeded per thread */
THREAD_LOCAL int thread_started;
THREAD_LOCAL uint32_t thread_id;         /* this thread's id, once asked (a system call); 0 before */

/* ---- configuration ---- */

extern char** environ;

/* The process's environment as it started, for calls made before the C library set up `environ` (from
 * .preinit_array, which runs before any library's constructor, libc's own included). Read with plain
 * system calls into static memory; empty when /proc is not mounted. */
static char initial_environment[256 * 1024];
static size_t initial_environment_bytes;
static int initial_environment_read;

static const char* initial_getenv(const char* name) {
  if (!initial_environment_read) {
    initial_environment_read = 1;
    const int fd = open("/proc/self/environ", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      ssize_t got;
      while (initial_environment_bytes < sizeof initial_environment - 1 &&
             (got = read(fd, initial_environment + initial_environment_bytes,
                         sizeof initial_environment - 1 - initial_environment_bytes)) > 0)
        initial_environment_bytes += (size_t)got;
      close(fd);
    }
  }
  const size_t length = strlen(name);
  for (size_t at = 0; at < initial_environment_bytes; at += strlen(initial_environment + at) + 1)
    if (strncmp(initial_environment + at, name, length) == 0 && initial_environment[at + length] == '=')
      return initial_environment + at + length + 1;
  return NULL;
}

static uint64_t environment_number(const char* name, uint64_t otherwise) {
  const char* text = environ ? getenv(name) : initial_getenv(name); /* neither allocates */
  if (!text || !*text) return otherwise;
  char* end = NULL;
  unsigned long long value = strtoull(text, &end, 10);
  return (end && *end == '\0' && value > 0) ? (uint64_t)value : otherwise;
}

static uint64_t interval(void) {
  if (!mean_interval) mean_interval = environment_number("HEAPSCOPE_SAMPLE_BYTES", kDefaultMeanInterval);
  return mean_interval;
}

static uint64_t round_up_to_power_of_two(uint64_t n) {
  uint64_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

static uint64_t now_ns(clockid_t clock) {
  struct timespec t;
  clock_gettime(clock, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static uint32_t this_thread(void) {
  if (!thread_id) thread_id = (uint32_t)syscall(SYS_gettid);
  return thread_id;
}

/* ---- sampling: exponentially distributed gaps with the mean interval, as the allocators' profilers ---- */

static uint64_t next_random(void) {
  if (!random_state) random_state = now_ns(CLOCK_MONOTONIC) ^ ((uint64_t)this_thread() << 32) ^ 0x9e3779b97f4a7c15u;
  random_state ^= random_state >> 12;
  random_state ^= random_state << 25;
  random_state ^= random_state >> 27;
  return random_state * 0x2545f4914f6cdd1du;
}

static int64_t next_gap(void) {
  const uint64_t mean = interval();
  if (mean == 1) return 0;  /* every allocation: the countdown is not above 0 after any, malloc(0) included */
  /* A uniform in (0, 1], then -ln(u) * mean. */
  const double u = ((double)(next_random() >> 11) + 1.0) / 9007199254740992.0;
  const double gap = -log(u) * (double)mean;
  return gap < 1.0 ? 1 : (int64_t)gap;
}

/* The countdown ran out. A thread's countdown starts at 0: its first allocation draws the first gap and
 * counts against it. */
__attribute__((noinline)) static int sample_due(void) {
  if (!thread_started) {
    thread_started = 1;
    bytes_until_sample += next_gap();
    if (bytes_until_sample > 0) return 0;
  }
  bytes_until_sample = next_gap();
  return 1;
}

/* Counts an allocation of `bytes` down: true while no sample is due. This is all the recorder does on the
 * path of almost every allocation — one thread-local subtraction and a test, before glibc's own function
 * is jumped to (a tail call: no frame of the recorder's stays). */
static inline int counts_down(size_t bytes) {
  bytes_until_sample -= (int64_t)bytes;
  return __builtin_expect(bytes_until_sample > 0, 1);
}

/* ---- the table ---- */

static struct hs_sites_sample* samples(void) { return (struct hs_sites_sample*)((char*)table + table->samples_offset); }
static struct hs_sites_stack* stacks(void) { return (struct hs_sites_stack*)((char*)table + table->stacks_offset); }

/* The filter free() asks before it takes the lock: two arrays of counts of the live samples per bucket, a
 * near one of 4096 buckets (the recorder's own, so that free() reaches it without loading a pointer) and a
 * far one sized to the table (in the table's mapping). A block is maybe sampled when both its buckets
 * count some; at the default rate few samples are live and the near array alone answers almost every
 * free(). The near bucket is the block's address bits 4-15 (blocks are 16-byte aligned): three
 * instructions, where a multiplicative hash took five. The far one, asked rarely, hashes the address: its
 * bits alone would put every block of a 64 KiB stretch in one bucket, which would fill up when every
 * allocation is sampled. Counts, not bits, so that a freed sample leaves no mark behind (bits would
 * fill up over a long run until every free() took the lock); a count that reaches 255 stays there. Set
 * before the table is published, read after it; before it is made every near count is 0. */
enum { kNearBuckets = 4096 };
static uint8_t near_counts[kNearBuckets];
static uint8_t* far_counts;
static uint64_t far_mask;

static uint8_t* near_bucket(uint64_t block) { return &near_counts[(block >> 4) & (kNearBuckets - 1)]; }
static uint8_t* far_bucket(uint64_t block) { return &far_counts[((block * 0x9e3779b97f4a7c15u) >> 16) & far_mask]; }

/* Under the lock. */
static void count_in(uint8_t* bucket) {
  if (*bucket != UINT8_MAX) __atomic_store_n(bucket, (uint8_t)(*bucket + 1), __ATOMIC_RELAXED);
}
static void count_out(uint8_t* bucket) {
  if (*bucket != UINT8_MAX && *bucket != 0) __atomic_store_n(bucket, (uint8_t)(*bucket - 1), __ATOMIC_RELAXED);
}

static uint64_t hash_address(uint64_t a) {
  a ^= a >> 33;
  a *= 0xff51afd7ed558ccdu;
  a ^= a >> 33;
  return a;
}

/* Under the lock. */
static void make_table(void) {
  if (table || table_failed) return;
  const uint64_t mean = interval();
  const uint64_t slots = round_up_to_power_of_two(
      environment_number("HEAPSCOPE_SITES_SLOTS", mean == 1 ? kEverySampleSlots : kDefaultSlots));
  const uint64_t stack_slots = slots / 16 < 4096 ? 4096 : slots / 16;  /* stacks repeat: far fewer */
  const uint64_t far_buckets = slots * 2;
  const uint64_t page = 4096;
  const uint64_t header = (sizeof(struct hs_sites_header) + 63) & ~(uint64_t)63;
  const uint64_t samples_bytes = slots * sizeof(struct hs_sites_sample);
  const uint64_t stacks_bytes = stack_slots * sizeof(struct hs_sites_stack);
  const uint64_t filter_bytes = far_buckets;
  const uint64_t total = (header + samples_bytes + stacks_bytes + filter_bytes + page - 1) & ~(page - 1);
  /* Between two inaccessible pages: the kernel merges adjacent anonymous mappings of the same protection
   * into one, and the table must start a mapping of its own, which is how a reader finds it. */
  char* reserved = mmap(NULL, total + 2 * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (reserved == MAP_FAILED || mprotect(reserved + page, total, PROT_READ | PROT_WRITE) != 0) {
    table_failed = 1;
    return;
  }
  /* At a sampling rate, the table's pages are made now, in one call, rather than one fault at a time on
   * the samples' path: samples land at random slots, so each would fault a page of its own while holding
   * the lock, and the other threads' samples and frees of sampled blocks would wait (a malloc
   * microbenchmark took a thousand faults and five times the context switches). A few MiB; the table of
   * every allocation, ten times larger, fills as it is used. Best effort: before Linux 5.14 it faults. */
  if (mean != 1) madvise(reserved + page, total, MADV_POPULATE_WRITE);
  struct hs_sites_header* h = (struct hs_sites_header*)(reserved + page);
  memcpy(h->magic, HS_SITES_MAGIC, sizeof h->magic);
  h->version = HS_SITES_VERSION;
  h->header_bytes = sizeof *h;
  h->mapping_bytes = total;
  h->mean_interval = mean;
  h->sample_slots = slots;
  h->stack_slots = stack_slots;
  h->filter_bytes = filter_bytes;
  h->samples_offset = header;
  h->stacks_offset = header + samples_bytes;
  h->filter_offset = header + samples_bytes + stacks_bytes;
  h->start_time_ns = now_ns(CLOCK_REALTIME);
  h->pid = (uint32_t)getpid();
  h->max_frames = HS_SITES_MAX_FRAMES;
  start_monotonic_ns = now_ns(CLOCK_MONOTONIC);
  far_counts = (uint8_t*)h + h->filter_offset;
  far_mask = far_buckets - 1;
  __atomic_store_n(&table, h, __ATOMIC_RELEASE);
}

/* Whether the block at `block` may have a sample, read without the lock (before the table is made, every
 * near count is 0): a stale 0 would only mean that a block sampled by another thread at this very moment is
 * freed before its sample is stored, which cannot happen to one block. */
static inline int maybe_sampled(uint64_t block) {
  return __atomic_load_n(near_bucket(block), __ATOMIC_RELAXED) && __atomic_load_n(far_bucket(block), __ATOMIC_RELAXED);
}

/* Under the lock: the stack's slot, stored once; HS_SITES_NO_STACK when the set is full. */
static uint32_t store_stack(const uint64_t* frames, uint32_t depth) {
  uint64_t hash = 0xcbf29ce484222325u;
  for (uint32_t i = 0; i < depth; ++i) hash = (hash ^ frames[i]) * 0x100000001b3u;
  if (!hash) hash = 1;
  const uint64_t mask = table->stack_slots - 1;
  if (table->stacks_used * 4 >= table->stack_slots * 3) {  /* keep probes short: 3/4 full is full */
    for (uint64_t i = hash & mask, n = 0; n < table->stack_slots && stacks()[i].hash; i = (i + 1) & mask, ++n)
      if (stacks()[i].hash == hash && stacks()[i].depth == depth &&
          memcmp(stacks()[i].frames, frames, depth * sizeof *frames) == 0)
        return (uint32_t)i;
    ++table->stacks_dropped;
    return HS_SITES_NO_STACK;
  }
  uint64_t i = hash & mask;
  for (; stacks()[i].hash; i = (i + 1) & mask)
    if (stacks()[i].hash == hash && stacks()[i].depth == depth &&
        memcmp(stacks()[i].frames, frames, depth * sizeof *frames) == 0)
      return (uint32_t)i;
  struct hs_sites_stack* s = &stacks()[i];
  memcpy(s->frames, frames, depth * sizeof *frames);
  s->depth = depth;
  __atomic_store_n(&s->hash, hash, __ATOMIC_RELEASE);
  ++table->stacks_used;
  return (uint32_t)i;
}

/* Under the lock. */
static void store_sample(uint64_t hidden, uint64_t requested, const uint64_t* frames, uint32_t depth) {
  ++table->samples_taken;
  if (table->samples_live * 4 >= table->sample_slots * 3) {
    ++table->samples_dropped;
    return;
  }
  const uint64_t mask = table->sample_slots - 1;
  uint64_t i = hash_address(hidden) & mask;
  while (samples()[i].hidden_address != HS_SITES_EMPTY && samples()[i].hidden_address != hidden) i = (i + 1) & mask;
  struct hs_sites_sample* s = &samples()[i];
  if (s->hidden_address == HS_SITES_EMPTY) {
    ++table->samples_live;
    count_in(near_bucket(~hidden));
    count_in(far_bucket(~hidden));
  }
  s->requested = requested;
  s->time_ns = now_ns(CLOCK_MONOTONIC) - start_monotonic_ns;
  s->stack = store_stack(frames, depth);
  s->thread = this_thread();
  s->hidden_address = hidden;
}

/* Under the lock: removes the sample of the block `hidden` (complemented, as stored), if it has one,
 * shifting the probe run back over the hole. */
static void forget_sample(uint64_t hidden) {
  const uint64_t mask = table->sample_slots - 1;
  uint64_t i = hash_address(hidden) & mask;
  while (samples()[i].hidden_address != hidden) {
    if (samples()[i].hidden_address == HS_SITES_EMPTY) return;
    i = (i + 1) & mask;
  }
  count_out(near_bucket(~hidden));
  count_out(far_bucket(~hidden));
  for (uint64_t j = (i + 1) & mask;; j = (j + 1) & mask) {
    const uint64_t here = samples()[j].hidden_address;
    if (here == HS_SITES_EMPTY) break;
    const uint64_t home = hash_address(here) & mask;
    /* Move j into the hole at i unless its home lies cyclically in (i, j]. */
    const int stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
    if (!stays) {
      samples()[i] = samples()[j];
      i = j;
    }
  }
  samples()[i].hidden_address = HS_SITES_EMPTY;
  --table->samples_live;
}

/* ---- stacks ---- */

/* The recorder's exported functions keep a frame pointer (-fno-omit-frame-pointer): at their %rbp are the
 * caller's %rbp and the return address into it, and the caller's %rsp is just above. That is where the
 * walk starts, so none of the recorder's own frames is walked. */
static struct hs_frame caller_frame(const uint64_t* frame_pointer) {
  return (struct hs_frame){frame_pointer[1], (uint64_t)(uintptr_t)(frame_pointer + 2), frame_pointer[0]};
}

struct unwind_state {
  uint64_t* frames;
  uint32_t depth;
  uint32_t skipped;
  uint64_t caller;  /* the return address into the allocating function: the first frame kept */
};

static _Unwind_Reason_Code collect_frame(struct _Unwind_Context* context, void* arg) {
  struct unwind_state* state = arg;
  const uint64_t ip = (uint64_t)_Unwind_GetIP(context);
  if (!ip) return _URC_END_OF_STACK;
  if (state->caller) {  /* the recorder's own frames and the allocation function's come first */
    if (ip != state->caller) {
      if (++state->skipped > 8) state->caller = 0;  /* not found: keep from here */
      else return _URC_NO_REASON;
    } else {
      state->caller = 0;
    }
  }
  state->frames[state->depth++] = ip;
  return state->depth == HS_SITES_MAX_FRAMES ? _URC_END_OF_STACK : _URC_NO_REASON;
}

/* The stack from the allocating function out: the rules walker's, or libgcc's for a stack it declines (a
 * signal frame on it, a frame described by a DWARF expression). */
static uint32_t walk_stack(const uint64_t* frame_pointer, uint64_t* frames) {
  const int depth = hs_cfa_backtrace(caller_frame(frame_pointer), frames, HS_SITES_MAX_FRAMES);
  if (depth >= 0) return (uint32_t)depth;
  struct unwind_state state = {frames, 0, 0, frame_pointer[1]};
  _Unwind_Backtrace(collect_frame, &state);
  return state.depth;
}

/* The allocation of `bytes` at `block`, by the function the exported function at `frame_pointer` returns
 * into, when its sample is due. */
__attribute__((noinline)) static void record_sample(void* block, size_t bytes, const uint64_t* frame_pointer) {
  recording = 1;
  uint64_t frames[HS_SITES_MAX_FRAMES];
  const uint32_t depth = walk_stack(frame_pointer, frames);
  pthread_mutex_lock(&lock);
  make_table();
  if (table) store_sample(~(uint64_t)block, bytes, frames, depth);
  pthread_mutex_unlock(&lock);
  recording = 0;
}

/* An allocation whose countdown ran out. */
static inline void note_allocation(void* block, size_t bytes, const uint64_t* frame_pointer) {
  if (block != NULL && !recording && sample_due()) record_sample(block, bytes, frame_pointer);
}

/* Apart from the filter's test, so that free() saves no register on its way to glibc's. */
__attribute__((noinline)) static void forget_sample_locked(uint64_t hidden) {
  pthread_mutex_lock(&lock);
  forget_sample(hidden);
  pthread_mutex_unlock(&lock);
}

static inline void note_free(void* block) {
  if (__builtin_expect(block != NULL && maybe_sampled((uint64_t)block), 0)) forget_sample_locked(~(uint64_t)block);
}

/* ---- fork ---- */

static void before_fork(void) { pthread_mutex_lock(&lock); }
static void after_fork_in_parent(void) { pthread_mutex_unlock(&lock); }
static void after_fork_in_child(void) {
  thread_id = 0;  /* the forking thread goes on in the child under another id */
  pthread_mutex_unlock(&lock);
}

__attribute__((constructor)) static void start(void) {
  recording = 1;  /* pthread_atfork may allocate */
  pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child);
  recording = 0;
}

/* ---- the allocation functions ----
 * Each counts its bytes down first and, while no sample is due, jumps straight to glibc's function. */

#define FRAME ((const uint64_t*)__builtin_frame_address(0))

EXPORT void* malloc(size_t bytes) {
  if (counts_down(bytes)) return __libc_malloc(bytes);
  void* block = __libc_malloc(bytes);
  note_allocation(block, bytes, FRAME);
  return block;
}

/* Apart from free(), so that free() keeps no register across a call: both of its ways are jumps. */
__attribute__((noinline)) static void free_sampled(void* block) {
  if (block) forget_sample_locked(~(uint64_t)block);
  __libc_free(block);
}

EXPORT void free(void* block) {
  if (__builtin_expect(maybe_sampled((uint64_t)block), 0)) return free_sampled(block);  /* null too, rarely */
  __libc_free(block);
}

EXPORT void* calloc(size_t count, size_t bytes) {
  if (counts_down(count * bytes)) return __libc_calloc(count, bytes);
  void* block = __libc_calloc(count, bytes);
  note_allocation(block, count * bytes, FRAME);  /* calloc failed on an overflow: block is null */
  return block;
}

EXPORT void* realloc(void* old, size_t bytes) {
  if (old) note_free(old);
  if (counts_down(bytes)) return __libc_realloc(old, bytes);
  void* block = __libc_realloc(old, bytes);
  note_allocation(block, bytes, FRAME);
  return block;
}

/* glibc's reallocarray reallocates inside libc, out of reach: through realloc here instead. */
EXPORT void* reallocarray(void* old, size_t count, size_t bytes) {
  size_t total;
  if (__builtin_mul_overflow(count, bytes, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  if (old) note_free(old);
  if (counts_down(total)) return __libc_realloc(old, total);
  void* block = __libc_realloc(old, total);
  note_allocation(block, total, FRAME);
  return block;
}

EXPORT void* memalign(size_t alignment, size_t bytes) {
  if (counts_down(bytes)) return __libc_memalign(alignment, bytes);
  void* block = __libc_memalign(alignment, bytes);
  note_allocation(block, bytes, FRAME);
  return block;
}

EXPORT void* aligned_alloc(size_t alignment, size_t bytes) {
  if (counts_down(bytes)) return __libc_memalign(alignment, bytes);
  void* block = __libc_memalign(alignment, bytes);
  note_allocation(block, bytes, FRAME);
  return block;
}

EXPORT int posix_memalign(void** out, size_t alignment, size_t bytes) {
  if (alignment % sizeof(void*) != 0 || (alignment & (alignment - 1)) != 0) return EINVAL;
  void* block = __libc_memalign(alignment, bytes);
  if (!block) return ENOMEM;
  if (!counts_down(bytes)) note_allocation(block, bytes, FRAME);
  *out = block;
  return 0;
}

EXPORT void* valloc(size_t bytes) {
  if (counts_down(bytes)) return __libc_valloc(bytes);
  void* block = __libc_valloc(bytes);
  note_allocation(block, bytes, FRAME);
  return block;
}

EXPORT void* pvalloc(size_t bytes) {
  if (counts_down(bytes)) return __libc_pvalloc(bytes);
  void* block = __libc_pvalloc(bytes);
  note_allocation(block, bytes, FRAME);
  return block;
}
