/* capi_driver: heapscope's C API (frontends/capi/heapscope_capi.h) used as a frontend uses it, without a
 * debugger, so that the tests can check it where no debugger can host it: in a sanitizer build, gdb cannot
 * start with the ASan runtime preloaded (docs/robustness.md), but this program is built instrumented.
 *
 *   capi_driver core CORE [--exe EXE] COMMAND...   open the core, run one command line, print its output
 *   capi_driver live PID COMMAND...                stop PID with ptrace, hand every thread's registers to
 *                                                  the engine as a debugger would, run, detach
 *   capi_driver live-vectors PID COMMAND...        the same with every thread's vector registers too
 *                                                  (hs_open_live_with_vector_registers)
 *   capi_driver help [COMMAND]                     hs_help, and hs_commands for no command
 *
 * An address argument written "@NAME" is given to the engine as the expression NAME and evaluated here
 * (as a hexadecimal number), so the evaluator callback is exercised. Exit status: 0 with the output on
 * stdout; 1 with heapscope's error on stderr; 2 for a usage error. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <elf.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>

#include "heapscope_capi.h"

enum { MAX_THREADS = 1024, MAX_LINE = 8192 };

static int usage(void) {
  fprintf(stderr, "usage: capi_driver core CORE [--exe EXE] COMMAND... | live PID COMMAND... | "
                  "live-vectors PID COMMAND... | help [COMMAND]\n");
  return 2;
}

/* The evaluator a debugger frontend would give: here an expression is a hexadecimal address. */
static int evaluate_hex(void* ctx, const char* expression, uint64_t* address, char** error) {
  (void)ctx;
  char* end = NULL;
  errno = 0;
  unsigned long long value = strtoull(expression, &end, 16);
  if (errno || end == expression || *end) {
    *error = "capi_driver evaluates hexadecimal numbers only";
    return 1;
  }
  *address = value;
  return 0;
}

/* The words of a command line joined with spaces, "@" dropped from expressions. */
static int join_command(int argc, char** argv, char* line) {
  line[0] = '\0';
  size_t used = 0;
  for (int i = 0; i < argc; ++i) {
    const char* word = argv[i][0] == '@' ? argv[i] + 1 : argv[i];
    int n = snprintf(line + used, MAX_LINE - used, "%s%s", i ? " " : "", word);
    if (n < 0 || (size_t)n >= MAX_LINE - used) return 0;
    used += (size_t)n;
  }
  return argc > 0;
}

static int run_and_print(hs_session* session, const char* line) {
  char* output = NULL;
  char* error = NULL;
  int status = hs_run(session, line, evaluate_hex, NULL, &output, &error);
  if (status == 0) fputs(output, stdout);
  else fprintf(stderr, "%s\n", error ? error : "hs_run failed without a message");
  hs_free(output);
  hs_free(error);
  return status == 0 ? 0 : 1;
}

static int run_on_core(int argc, char** argv) {
  if (argc < 2) return usage();
  const char* core = argv[0];
  const char* exe = NULL;
  int first = 1;
  if (argc >= 4 && strcmp(argv[1], "--exe") == 0) exe = argv[2], first = 3;
  char line[MAX_LINE];
  if (!join_command(argc - first, argv + first, line)) return usage();
  char* error = NULL;
  hs_session* session = hs_open_core(core, exe, NULL, &error);
  if (!session) {
    fprintf(stderr, "%s\n", error ? error : "hs_open_core failed without a message");
    hs_free(error);
    return 1;
  }
  int status = run_and_print(session, line);
  hs_close(session);
  return status;
}

/* Attaches every thread of pid (PTRACE_ATTACH stops each), reading its registers into threads. */
static size_t stop_threads(int pid, hs_thread* threads, int* tids) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/task", pid);
  DIR* tasks = opendir(path);
  if (!tasks) return 0;
  size_t count = 0;
  for (struct dirent* entry; (entry = readdir(tasks)) && count < MAX_THREADS;) {
    int tid = atoi(entry->d_name);
    if (tid <= 0 || ptrace(PTRACE_ATTACH, tid, NULL, NULL) != 0) continue;
    waitpid(tid, NULL, __WALL);
    struct user_regs_struct regs;
    if (ptrace(PTRACE_GETREGS, tid, NULL, &regs) != 0) {
      ptrace(PTRACE_DETACH, tid, NULL, NULL);
      continue;
    }
    tids[count] = tid;
    threads[count].tid = (uint32_t)tid;
    _Static_assert(sizeof regs == HS_REGISTER_COUNT * sizeof(uint64_t), "user_regs_struct is hs_thread's order");
    memcpy(threads[count].registers, &regs, sizeof regs);
    ++count;
  }
  closedir(tasks);
  /* A debugger lists the main thread first, as a core does. */
  for (size_t i = 0; i < count; ++i)
    if (tids[i] == pid && i) {
      hs_thread t = threads[0]; threads[0] = threads[i]; threads[i] = t;
      int id = tids[0]; tids[0] = tids[i]; tids[i] = id;
    }
  return count;
}

/* The thread's XSAVE area, as a debugger reads it: xmm0-15 in the legacy area at byte 160, the upper halves
 * of ymm0-15 at 576 when the header (XSTATE_BV at 512) marks AVX state present. Without the area, no
 * vector registers (lanes_read 0). */
static void read_vector_registers(int tid, hs_vector_registers* out) {
  static unsigned char area[4096];
  struct iovec io = {area, sizeof area};
  memset(out, 0, sizeof *out);
  if (ptrace(PTRACE_GETREGSET, tid, (void*)NT_X86_XSTATE, &io) != 0 || io.iov_len < 576) return;
  uint64_t components;
  memcpy(&components, area + 512, sizeof components);
  for (int r = 0; r < HS_VECTOR_REGISTER_COUNT; ++r) {
    memcpy(&out->lanes[r][0], area + 160 + 16 * r, 16);
    if ((components & 4) && io.iov_len >= 576 + 256) memcpy(&out->lanes[r][2], area + 576 + 16 * r, 16);
  }
  out->lanes_read = 4; /* upper halves not marked present are zero, as the hardware would load them */
}

static int run_on_live(int argc, char** argv, int with_vectors) {
  if (argc < 2) return usage();
  int pid = atoi(argv[0]);
  char line[MAX_LINE];
  if (pid <= 0 || !join_command(argc - 1, argv + 1, line)) return usage();
  static hs_thread threads[MAX_THREADS];
  static int tids[MAX_THREADS];
  size_t count = stop_threads(pid, threads, tids);
  if (count == 0) {
    fprintf(stderr, "capi_driver: cannot attach to %d: %s\n", pid, strerror(errno));
    return 1;
  }
  char* error = NULL;
  hs_session* session = NULL;
  if (with_vectors) {
    static hs_vector_registers vectors[MAX_THREADS];
    for (size_t i = 0; i < count; ++i) read_vector_registers(tids[i], &vectors[i]);
    session = hs_open_live_with_vector_registers(pid, threads, vectors, count, NULL, &error);
  } else {
    session = hs_open_live(pid, threads, count, &error);
  }
  int status = 1;
  if (session) {
    status = run_and_print(session, line);
    hs_close(session);
  } else {
    fprintf(stderr, "%s\n", error ? error : "hs_open_live failed without a message");
    hs_free(error);
  }
  for (size_t i = 0; i < count; ++i) ptrace(PTRACE_DETACH, tids[i], NULL, NULL);
  return status;
}

static int print_help(int argc, char** argv) {
  char* text = argc > 0 ? hs_help(argv[0]) : hs_commands();
  if (!text) return 1;
  fputs(text, stdout);
  hs_free(text);
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  if (strcmp(argv[1], "core") == 0) return run_on_core(argc - 2, argv + 2);
  if (strcmp(argv[1], "live") == 0) return run_on_live(argc - 2, argv + 2, 0);
  if (strcmp(argv[1], "live-vectors") == 0) return run_on_live(argc - 2, argv + 2, 1);
  if (strcmp(argv[1], "help") == 0) return print_help(argc - 2, argv + 2);
  return usage();
}
