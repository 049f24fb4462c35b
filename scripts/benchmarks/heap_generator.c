// Benchmark heap generator: makes a process with N live malloc blocks (default 5 million) in linked
// chains anchored by one root table, leaks a known fraction of the chains, and records the exact address
// of every leaked block, so the benchmark can check leak verdicts as well as time them.
//
// The root table is reached from the typed global g_chains, so that heapscope's DWARF typing (built with
// -g) can type the whole live heap: g_chains -> the table (struct chain_node*[]) -> each chain's nodes
// through `next`.
//
// usage: heap_generator BLOCKS LEAK_PERCENT LEAK_FILE
// Prints READY once the heap is built, then sleeps until killed (scripts/capture-core takes the core).
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// One link of a chain: 16..56 requested bytes, of which only `next` is used; the rest is payload.
struct chain_node {
  struct chain_node* next;
  uint64_t payload[];
};

struct chain_node** g_chains;  // the root table of the typed heap: one anchor per chain

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t next_random(void) {  // xorshift64: deterministic, so runs are comparable
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

struct job {
  size_t first_chain, chains, blocks_per_chain;
  struct chain_node** roots;
};

// Each chain is 1..2*average blocks of 16..56 requested bytes (32..64-byte chunks).
static void* build_chains(void* arg) {
  struct job* j = arg;
  for (size_t c = j->first_chain; c < j->first_chain + j->chains; ++c) {
    struct chain_node* head = NULL;
    for (size_t i = 0; i < j->blocks_per_chain; ++i) {
      struct chain_node* n = malloc(16 + (next_random() % 6) * 8);
      if (!n) abort();
      n->next = head;
      head = n;
    }
    j->roots[c] = head;
  }
  return NULL;
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s BLOCKS LEAK_PERCENT LEAK_FILE\n", argv[0]);
    return 2;
  }
  const size_t blocks = strtoull(argv[1], NULL, 10);
  const unsigned leak_percent = (unsigned)atoi(argv[2]);
  const size_t per_chain = 50;
  const size_t chains = blocks / per_chain;
  struct chain_node** roots = calloc(chains, sizeof *roots);  // one large (mmapped) root table
  g_chains = roots;

  // Half of the chains are built by a second thread so that two arenas (and both cores) take part.
  struct job main_job = {0, chains / 2, per_chain, roots};
  struct job worker_job = {chains / 2, chains - chains / 2, per_chain, roots};
  pthread_t worker;
  pthread_create(&worker, NULL, build_chains, &worker_job);
  build_chains(&main_job);
  pthread_join(worker, NULL);

  FILE* leaks = fopen(argv[3], "w");
  if (!leaks) return 1;
  size_t leaked_blocks = 0;
  for (size_t c = 0; c < chains; ++c) {
    if (next_random() % 100 >= leak_percent) continue;
    for (struct chain_node* n = roots[c]; n; n = n->next) {
      fprintf(leaks, "%lu\n", (unsigned long)(uintptr_t)n);
      ++leaked_blocks;
    }
    roots[c] = NULL;  // the chain's only anchor is gone: 1 direct leak + per_chain-1 indirect
  }
  fclose(leaks);
  fprintf(stderr, "generator: %zu blocks in %zu chains, %zu leaked\n", chains * per_chain, chains, leaked_blocks);
  printf("READY\n");
  fflush(stdout);
  for (;;) pause();
}
