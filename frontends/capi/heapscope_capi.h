/* heapscope_capi.h: the C interface to heapscope's engine, for frontends that cannot link C++ (the GDB
 * frontend loads it through Python's ctypes).
 *
 * A session is one process image — a core file, or a stopped live process — with everything heapscope
 * derives from it computed once and kept for the following commands. Commands are the engine's command
 * table, written as on the command line after `heapscope` and the core: "leaks --json",
 * "retainers ptr->next", "help", "blocks --help".
 *
 * Strings heapscope returns (output, error, help) are allocated by heapscope and released with
 * hs_free. Functions never throw and never abort on bad input; they return NULL or non-zero with a
 * one-sentence *error instead. A session is not safe for concurrent use from several threads. */
#ifndef HEAPSCOPE_CAPI_H
#define HEAPSCOPE_CAPI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HS_API __attribute__((visibility("default")))

typedef struct hs_session hs_session;

/* x86-64 general registers in the kernel's user_regs_struct order (PTRACE_GETREGS, NT_PRSTATUS). */
enum {
  HS_R15, HS_R14, HS_R13, HS_R12, HS_RBP, HS_RBX, HS_R11, HS_R10, HS_R9, HS_R8, HS_RAX, HS_RCX, HS_RDX,
  HS_RSI, HS_RDI, HS_ORIG_RAX, HS_RIP, HS_CS, HS_EFLAGS, HS_RSP, HS_SS, HS_FS_BASE, HS_GS_BASE, HS_DS, HS_ES,
  HS_FS, HS_GS, HS_REGISTER_COUNT
};

/* One thread of a stopped live process, as its tracer (the debugger) sees it. */
typedef struct hs_thread {
  uint32_t tid;
  uint64_t registers[HS_REGISTER_COUNT];
} hs_thread;

/* Turns an address argument of a command (e.g. "ptr->next") into an address. Returns 0 and sets
 * *address, or non-zero and may set *error to a message, which heapscope copies and does not free (it
 * must stay valid until hs_run returns). */
typedef int (*hs_evaluate_fn)(void* ctx, const char* expression, uint64_t* address, char** error);

/* Opens a core file. exe_or_null replaces the main executable's recorded path. options_or_null holds
 * the CLI's target options as one string: "--no-debug-files", "--debug-dir DIR" (repeatable),
 * "--no-debuginfod", "--sysroot DIR", "--exe FILE". */
HS_API hs_session* hs_open_core(const char* core, const char* exe_or_null, const char* options_or_null, char** error);

/* Opens a live process that the caller keeps stopped (it is the process's tracer) for as long as the
 * session is used; memory is read through /proc/PID/mem, never written. threads: every thread with
 * its registers. */
HS_API hs_session* hs_open_live(int pid, const hs_thread* threads, size_t count, char** error);

/* hs_open_live with target options as for hs_open_core ("--no-debuginfod", "--debug-dir DIR", ...). */
HS_API hs_session* hs_open_live_with_options(int pid, const hs_thread* threads, size_t count,
                                             const char* options_or_null, char** error);

/* A thread's SSE/AVX registers, each as four 8-byte lanes: lanes[r][0..1] is xmm r, lanes[r][2..3] the
 * upper half of ymm r. lanes_read says how many lanes of each register the caller filled: 0 (none), 2
 * (xmm only: no AVX) or 4. */
#define HS_VECTOR_REGISTER_COUNT 16
#define HS_VECTOR_LANES 4
typedef struct hs_vector_registers {
  uint32_t lanes_read;
  uint64_t lanes[HS_VECTOR_REGISTER_COUNT][HS_VECTOR_LANES];
} hs_vector_registers;

/* hs_open_live_with_options with every thread's vector registers (vectors_or_null[i] belongs to
 * threads[i]; NULL: none known), which are roots like the general registers: a pointer held only in
 * xmm0 keeps its block alive. */
HS_API hs_session* hs_open_live_with_vector_registers(int pid, const hs_thread* threads,
                                                      const hs_vector_registers* vectors_or_null, size_t count,
                                                      const char* options_or_null, char** error);

/* Runs one command line against the session. evaluate (may be NULL: then addresses are numbers) is the
 * session's address evaluator for this call only. Returns 0 with *output set (the rendered report), or
 * non-zero with *error set. */
HS_API int hs_run(hs_session* session, const char* command_line, hs_evaluate_fn evaluate, void* ctx, char** output,
                  char** error);

/* What a frontend may give hs_run_with_callbacks; every member may be NULL. */
typedef int (*hs_interrupted_fn)(void* ctx);  /* non-zero: stop the command (the user pressed Ctrl-C) */
/* The progress line of a long command ("heapscope: scan 42%"), or done != 0 (line "") once it is over:
 * then remove what was shown. Never called in a command's first second, nor for JSON output. */
typedef void (*hs_progress_fn)(void* ctx, const char* line, int done);
typedef struct hs_callbacks {
  hs_evaluate_fn evaluate;
  hs_interrupted_fn interrupted;
  hs_progress_fn progress;
  void* ctx; /* passed to each */
} hs_callbacks;

/* hs_run's return value when the interrupted callback stopped the command (*error is "interrupted"). What
 * was finished before is kept: the next command on the session goes on from there. */
#define HS_INTERRUPTED 130

/* hs_run with callbacks. The command runs on a thread of its own while the calling thread calls every
 * callback (a debugger's Python may only be used from its own thread): `interrupted` every 50 ms,
 * `progress` at most every 100 ms, `evaluate` when the command needs an address. A stop asked for by
 * `interrupted` takes effect within a second. */
HS_API int hs_run_with_callbacks(hs_session* session, const char* command_line, const hs_callbacks* callbacks,
                                 char** output, char** error);

/* Help of one command (its options), or the list of commands for NULL or "". */
HS_API char* hs_help(const char* command_or_null);

/* The command table, one command a line: "<name>\t<one-line description>\n". */
HS_API char* hs_commands(void);

/* The names of hs_thread.registers, in order, one per line ("r15\nr14\n…"): a frontend that reads
 * registers by name (GDB's Python) takes the order from here rather than keeping a copy. Free with hs_free. */
HS_API char* hs_register_names(void);

HS_API void hs_free(char* text);
HS_API void hs_close(hs_session* session);

#ifdef __cplusplus
}
#endif

#endif /* HEAPSCOPE_CAPI_H */
