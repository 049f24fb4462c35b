/* scripts/benchmarks/recorder_overhead.py's floor: a preloaded library whose malloc, free, calloc and realloc
 * do nothing but jump on to glibc's. What it costs a program is what any allocator wrapper loaded with
 * LD_PRELOAD costs it before doing anything (glibc 2.34 removed the malloc hooks: there is no other way in),
 * so the recorder's overhead can be read against it. Built by the bench, not by the project. */
#include <stddef.h>
extern void* __libc_malloc(size_t);
extern void __libc_free(void*);
extern void* __libc_calloc(size_t, size_t);
extern void* __libc_realloc(void*, size_t);
void* malloc(size_t bytes) { return __libc_malloc(bytes); }
void free(void* block) { __libc_free(block); }
void* calloc(size_t count, size_t bytes) { return __libc_calloc(count, bytes); }
void* realloc(void* old, size_t bytes) { return __libc_realloc(old, bytes); }
