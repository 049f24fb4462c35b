/* scripts/benchmarks/recorder_overhead.py's worst case, a malloc microbenchmark: two threads each allocate and free 4M blocks of random sizes, keeping 4096 live. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
static void* run(void* seed_arg) {
  uint64_t x = (uint64_t)(uintptr_t)seed_arg * 0x9e3779b97f4a7c15u + 1;
  void* live[4096] = {0};
  for (int i = 0; i < 4000000; ++i) {
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    const int slot = (int)(x % 4096);
    free(live[slot]);
    live[slot] = malloc(16 + (x >> 20) % 1024);
  }
  for (int i = 0; i < 4096; ++i) free(live[i]);
  return NULL;
}
int main(void) {
  pthread_t t[2];
  for (long i = 0; i < 2; ++i) pthread_create(&t[i], NULL, run, (void*)(i + 1));
  for (int i = 0; i < 2; ++i) pthread_join(t[i], NULL);
  return 0;
}
