// Benchmark heap generator shaped like a real C++ server's heap, beside heap_generator.c's chains: an
// index std::map<uint64_t, std::string>, vectors of strings, polymorphic objects owned by unique_ptr,
// binary trees, rings (circular doubly linked lists), temporaries of which half were freed (holes between
// live blocks), most blocks in the main arena and the rest built by two worker threads in arenas of
// their own. A known share of each kind is leaked, and the address of every leaked block is recorded, so
// that the benchmark checks leak verdicts as well as timing them.
//
// usage: mixed_heap BLOCKS LEAK_PERCENT LEAK_FILE
// Prints READY once the heap is built, then sleeps until killed (scripts/capture-core takes the core).
#include <malloc.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <latch>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace {

// xorshift64, one state per thread (the workers run at once): deterministic, so runs are comparable.
thread_local std::uint64_t rng_state = 0x9e3779b97f4a7c15ull;
std::uint64_t next_random() {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

bool leak_this(unsigned percent) { return next_random() % 100 < percent; }

// A string of 10..60 characters: about half fit in std::string's own 15 bytes, half need a heap buffer.
std::string some_text(std::uint64_t n) {
  return std::string(10 + n % 51, static_cast<char>('a' + n % 26));
}

// The blocks of a string: its heap buffer when it has one.
void record_string(std::vector<const void*>& out, const std::string& s) {
  if (s.capacity() > 15) out.push_back(s.data());
}

struct Shape {
  virtual ~Shape() = default;
  virtual double area() const = 0;
};
struct Circle : Shape {
  double radius = 1;
  double area() const override { return 3.14159 * radius * radius; }
};
struct Rectangle : Shape {
  double width = 2, height = 3;
  char label[40] = {};
  double area() const override { return width * height; }
};

struct TreeNode {
  TreeNode* left = nullptr;
  TreeNode* right = nullptr;
  std::uint64_t key = 0;
  double weight = 0;
};

struct RingNode {
  RingNode* next = nullptr;
  RingNode* previous = nullptr;
  std::uint64_t value = 0;
};

}  // namespace

// The roots, typed for DWARF.
std::map<std::uint64_t, std::string> g_index;
std::vector<std::vector<std::string>> g_string_lists;
std::vector<std::unique_ptr<Shape>> g_shapes;
std::vector<TreeNode*> g_trees;
std::vector<RingNode*> g_rings;
std::vector<void*> g_survivors;  // one in two temporaries

namespace {

// Each builder makes about `blocks` blocks of its kind, leaks `percent` of its units, and records the
// leaked blocks' addresses in `leaked`. Builders run on the main thread, or on a worker (its own arena).

void build_index(std::size_t blocks, unsigned percent, std::vector<const void*>& leaked) {
  // 1 node + a buffer for about half the strings: about 1.5 blocks an entry. A leaked entry is a
  // std::string allocated with new and dropped.
  for (std::size_t i = 0; i < blocks * 2 / 3; ++i) {
    std::string text = some_text(next_random());
    if (leak_this(percent)) {
      auto* lost = new std::string(std::move(text));
      leaked.push_back(lost);
      record_string(leaked, *lost);
    } else {
      g_index.emplace(next_random(), std::move(text));
    }
  }
}

std::vector<std::string> string_list(std::size_t strings) {
  std::vector<std::string> list;
  list.reserve(strings);
  for (std::size_t i = 0; i < strings; ++i) list.push_back(some_text(next_random()));
  return list;
}

void build_string_lists(std::size_t blocks, unsigned percent, std::vector<const void*>& leaked,
                        std::vector<std::vector<std::string>>& into) {
  // Lists of 20 strings: one body and about 10 buffers each. A leaked list is a vector allocated with new.
  for (std::size_t made = 0; made < blocks;) {
    std::vector<std::string> list = string_list(20);
    std::size_t list_blocks = 1;
    for (const std::string& s : list) list_blocks += s.capacity() > 15;
    made += list_blocks;
    if (leak_this(percent)) {
      auto* lost = new std::vector<std::string>(std::move(list));
      leaked.push_back(lost);
      leaked.push_back(lost->data());
      for (const std::string& s : *lost) record_string(leaked, s);
    } else {
      into.push_back(std::move(list));
    }
  }
}

void build_shapes(std::size_t blocks, unsigned percent, std::vector<const void*>& leaked) {
  for (std::size_t i = 0; i < blocks; ++i) {
    std::unique_ptr<Shape> shape;
    if (next_random() % 2) shape = std::make_unique<Circle>();
    else shape = std::make_unique<Rectangle>();
    if (leak_this(percent)) leaked.push_back(shape.release());
    else g_shapes.push_back(std::move(shape));
  }
}

TreeNode* tree(std::size_t nodes, std::vector<const void*>* leaked) {
  if (nodes == 0) return nullptr;
  auto* node = new TreeNode{nullptr, nullptr, next_random(), 1.0};
  if (leaked) leaked->push_back(node);
  const std::size_t left = (nodes - 1) / 2;
  node->left = tree(left, leaked);
  node->right = tree(nodes - 1 - left, leaked);
  return node;
}

void build_trees(std::size_t blocks, unsigned percent, std::vector<const void*>& leaked) {
  // Trees of 1,000 nodes; a leaked tree is dropped whole (one direct leak, the rest indirect).
  for (std::size_t made = 0; made < blocks; made += 1000) {
    const bool lose = leak_this(percent);
    TreeNode* root = tree(1000, lose ? &leaked : nullptr);
    if (!lose) g_trees.push_back(root);
  }
}

void build_rings(std::size_t blocks, unsigned percent, std::vector<const void*>& leaked) {
  // Rings of 100 nodes; a leaked ring is a cycle no root reaches.
  for (std::size_t made = 0; made < blocks; made += 100) {
    const bool lose = leak_this(percent);
    RingNode* first = new RingNode{nullptr, nullptr, 0};
    first->next = first->previous = first;
    if (lose) leaked.push_back(first);
    for (int i = 1; i < 100; ++i) {
      auto* node = new RingNode{first, first->previous, next_random()};
      first->previous->next = node;
      first->previous = node;
      if (lose) leaked.push_back(node);
    }
    if (!lose) g_rings.push_back(first);
  }
}

void build_temporaries(std::size_t blocks) {
  // 2 * blocks temporaries of 24..280 bytes, every other one freed: holes among live blocks.
  std::vector<void*> all(blocks * 2);
  for (void*& p : all) p = std::malloc(24 + next_random() % 257);
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (i % 2) std::free(all[i]);
    else g_survivors.push_back(all[i]);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s BLOCKS LEAK_PERCENT LEAK_FILE\n", argv[0]);
    return 2;
  }
  // Recycled memory keeps the pointers it held (a moved-into string's unused bytes, the list of leaked
  // blocks once freed), and a conservative scan rightly follows them: a leaked block would then be
  // reachable. glibc's M_PERTURB overwrites each block as it is allocated and freed, so that what was
  // leaked is exactly what the record says.
  mallopt(M_PERTURB, 0x5a);
  const std::size_t blocks = std::strtoull(argv[1], nullptr, 10);
  const unsigned percent = static_cast<unsigned>(std::atoi(argv[2]));
  std::vector<const void*> leaked, worker_leaked[2];
  std::vector<std::vector<std::string>> worker_lists[2];

  // The workers' shares first, both at once, so that each has an arena of its own; each draws from a
  // random sequence of its own, so the heap is the same in every run.
  // Both are alive from their first allocation to their last (the latches), or the second would take
  // over the first's arena.
  std::thread workers[2];
  std::latch started(2), finished(2);
  for (int w = 0; w < 2; ++w) {
    workers[w] = std::thread([&, w] {
      started.arrive_and_wait();
      rng_state = 0x2545f4914f6cdd1dull * static_cast<std::uint64_t>(w + 1);
      build_string_lists(blocks / 10, percent, worker_leaked[w], worker_lists[w]);
      finished.arrive_and_wait();
    });
  }
  for (std::thread& worker : workers) worker.join();
  for (auto& lists : worker_lists)
    for (auto& list : lists) g_string_lists.push_back(std::move(list));
  g_string_lists.reserve(g_string_lists.size() + blocks / 100);

  build_index(blocks * 30 / 100, percent, leaked);
  build_string_lists(blocks * 10 / 100, percent, leaked, g_string_lists);
  build_shapes(blocks * 15 / 100, percent, leaked);
  build_trees(blocks * 10 / 100, percent, leaked);
  build_rings(blocks * 5 / 100, percent, leaked);
  build_temporaries(blocks * 10 / 100);

  FILE* out = std::fopen(argv[3], "w");
  if (!out) return 1;
  std::size_t count = 0;
  for (const auto* list : {&leaked, &worker_leaked[0], &worker_leaked[1]})
    for (const void* p : *list) {
      std::fprintf(out, "%lu\n", static_cast<unsigned long>(reinterpret_cast<std::uintptr_t>(p)));
      ++count;
    }
  std::fclose(out);
  // The records of what leaked are themselves heap blocks: freed now, so only the program's own remain.
  for (auto* list : {&leaked, &worker_leaked[0], &worker_leaked[1]}) std::vector<const void*>().swap(*list);
  std::fprintf(stderr, "mixed_heap: %zu leaked blocks recorded\n", count);
  std::printf("READY\n");
  std::fflush(stdout);
  // Vector registers keep what the moves above copied through them (a leaked vector's body): cleared, as
  // a conservative scan reads them too.
  __asm__ volatile("pxor %%xmm0, %%xmm0\n\tpxor %%xmm1, %%xmm1\n\tpxor %%xmm2, %%xmm2\n\tpxor %%xmm3, %%xmm3\n\t"
                   "pxor %%xmm4, %%xmm4\n\tpxor %%xmm5, %%xmm5\n\tpxor %%xmm6, %%xmm6\n\tpxor %%xmm7, %%xmm7\n\t"
                   "pxor %%xmm8, %%xmm8\n\tpxor %%xmm9, %%xmm9\n\tpxor %%xmm10, %%xmm10\n\tpxor %%xmm11, %%xmm11\n\t"
                   "pxor %%xmm12, %%xmm12\n\tpxor %%xmm13, %%xmm13\n\tpxor %%xmm14, %%xmm14\n\tpxor %%xmm15, %%xmm15"
                   ::: "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
                   "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
  for (;;) pause();
}
