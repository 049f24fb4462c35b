// The index cache: a heap, its graph and verdicts saved and loaded back unchanged; a damaged or stale
// file refused; the checks against the image catch a graph that is not the image's.
#include <algorithm>
#include <catch2/catch.hpp>

#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "base/progress.h"
#include "model/leak_verdicts.h"
#include "model/reference_graph.h"
#include "session/heap_model_json.h"
#include "session/index_cache.h"
#include "session/index_file.h"
#include "small_heap.h"

using namespace heapscope;
namespace fs = std::filesystem;

namespace {

// A cache directory and a file standing for the core (the key reads its size and times).
struct CacheDirectory {
  CacheDirectory() {
    char pattern[] = "/tmp/heapscope-index-XXXXXX";
    REQUIRE(::mkdtemp(pattern) != nullptr);
    path = pattern;
    std::ofstream(path / "app.core") << "core";
  }
  ~CacheDirectory() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
  CacheDirectory(const CacheDirectory&) = delete;
  CacheDirectory& operator=(const CacheDirectory&) = delete;
  IndexCache cache() const { return IndexCache((path / "app.core").string(), (path / "cache").string()); }
  fs::path path;
};

// Six blocks: 0 → 1 → 2 from a root, 3 ↔ 4 a lost cycle (4 through an interior pointer), 5 free.
struct Analysed : testing::SmallHeap {
  Analysed() : SmallHeap(6, {BlockState::in_use, BlockState::in_use, BlockState::in_use, BlockState::in_use,
                             BlockState::in_use, BlockState::free}) {
    anchor(0);
    link(0, 1);
    link(1, 2, 1);
    link(3, 4, 0, 8);
    link(4, 3);
    heap.allocator = "glibc";
    heap.version = "2.36";
    heap.warnings = {"a warning of the walk"};
    heap.mallinfo = MallInfo{};
    heap.mallinfo->uordblks = 123;
    heap.trim = TrimSettings{128 * 1024, 0};
    heap.figures.push_back({"stats.allocated", "bytes in use", 42, std::nullopt});
    heap.discovery.push_back({"main_arena", 0x7f0000001000, "debug-symbol"});
    heap.arenas[0].totals[0].add(32);
    heap.complete = false;
  }
  void analyse() {
    index = std::make_unique<BlockIndex>(heap);
    graph = std::make_unique<ReferenceGraph>(image, *index, roots, 1);
    verdicts = compute_verdicts(*graph, heap);
  }
  std::unique_ptr<BlockIndex> index;
  std::unique_ptr<ReferenceGraph> graph;
  LeakVerdicts verdicts;
};

// An analysed small heap, its index saved in a fresh cache directory.
struct SavedIndex {
  SavedIndex() {
    a.analyse();
    cache.save(key, a.heap, *a.graph, a.verdicts);
  }
  CacheDirectory dir;
  Analysed a;
  IndexCache cache = dir.cache();
  std::string key = cache.key(a.image, SymbolSearchOptions{}, {});
  fs::path file = cache.path_for(key);
};

std::vector<std::uint32_t> as_vector(std::span<const std::uint32_t> s) { return {s.begin(), s.end()}; }

}  // namespace

TEST_CASE("index cache: the heap's description survives JSON") {
  Analysed a;
  HeapModel back;
  REQUIRE(heap_meta_from_json(heap_meta_to_json(a.heap), back));
  CHECK(back.allocator == "glibc");
  CHECK(back.version == "2.36");
  CHECK(back.warnings == a.heap.warnings);
  REQUIRE(back.mallinfo);
  CHECK(back.mallinfo->uordblks == 123);
  REQUIRE(back.trim);
  CHECK(back.trim->threshold == 128 * 1024);
  REQUIRE(back.figures.size() == 1);
  CHECK(back.figures[0].own == 42u);
  CHECK(!back.figures[0].walk);
  CHECK(back.discovery[0].method == "debug-symbol");
  CHECK(back.arenas[0].heaps[0].start == a.heap.arenas[0].heaps[0].start);
  CHECK(back.arenas[0].totals[0].bytes == 32);
  CHECK(!back.complete);
  CHECK(!heap_meta_from_json("{\"allocator\": 1}", back));
  CHECK(!heap_meta_from_json("not json", back));
}

TEST_CASE("index cache: heap, graph and verdicts load back as they were saved") {
  CacheDirectory dir;
  Analysed a;
  a.analyse();
  const IndexCache cache = dir.cache();
  const std::string key = cache.key(a.image, SymbolSearchOptions{}, {});
  REQUIRE(!key.empty());
  std::string note;
  CHECK(!cache.load(key, &note));
  CHECK(note.empty());  // no file: nothing to say

  cache.save(key, a.heap, *a.graph, a.verdicts);
  std::unique_ptr<CachedProducts> loaded = cache.load(key, &note);
  REQUIRE(loaded);
  CHECK(note.empty());
  REQUIRE(loaded->heap->blocks.size() == a.heap.blocks.size());
  for (std::size_t b = 0; b < a.heap.blocks.size(); ++b) {
    CHECK(loaded->heap->blocks[b].chunk == a.heap.blocks[b].chunk);
    CHECK(loaded->heap->blocks[b].state == a.heap.blocks[b].state);
  }
  CHECK(loaded->heap->warnings == a.heap.warnings);
  CHECK(std::ranges::equal(loaded->verdicts.verdict, a.verdicts.verdict));
  CHECK(std::ranges::equal(loaded->verdicts.possibly, a.verdicts.possibly));
  CHECK(loaded->verdicts.leaked == a.verdicts.leaked);
  CHECK(a.verdicts.leaked == std::vector<BlockId>{3, 4});
  std::vector<std::uint32_t> pages(loaded->block_pages.begin(), loaded->block_pages.end());
  CHECK(pages == std::vector<std::uint32_t>(a.index->page_table().begin(), a.index->page_table().end()));

  const BlockIndex index(*loaded->heap);
  const ReferenceGraph g(a.image, index, a.roots, std::move(loaded->graph));
  REQUIRE(g.block_count() == a.graph->block_count());
  CHECK(g.edge_count() == a.graph->edge_count());
  for (BlockId b = 0; b < g.block_count(); ++b) {
    CHECK(as_vector(g.out_edges(b)) == as_vector(a.graph->out_edges(b)));
    CHECK(as_vector(g.in_edges(b)) == as_vector(a.graph->in_edges(b)));
    CHECK(as_vector(g.in_root_edges(b)) == as_vector(a.graph->in_root_edges(b)));
  }
  CHECK(as_vector(g.root_edges(0)) == as_vector(a.graph->root_edges(0)));
  CHECK(edge_is_interior(g.out_edges(3)[0]));
  std::string why;
  CHECK(check_graph(g, a.verdicts, &why));

  SECTION("another key finds nothing") { CHECK(!cache.load(key + "other option\n", &note)); }
  SECTION("a saved graph that is not the image's fails the check") {
    a.image.put(testing::SmallHeap::user(2), testing::SmallHeap::user(0));  // block 2 now points to block 0
    CHECK(!check_graph(g, a.verdicts, &why));
    CHECK(why.find("block 2") != std::string::npos);
  }
  SECTION("a root that points elsewhere fails the check") {
    a.anchor(2);
    CHECK(!check_graph(g, a.verdicts, &why));
    CHECK(why.find("root range 0") != std::string::npos);
  }
}

TEST_CASE("index cache: a damaged or cut file is refused, with a note") {
  const SavedIndex saved;
  const IndexCache& cache = saved.cache;
  const std::string& key = saved.key;
  const fs::path& file = saved.file;
  const auto size = fs::file_size(file);
  std::string note;

  SECTION("a byte flipped in the middle") {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(size / 2));
    const char c = static_cast<char>(f.get());
    f.seekp(static_cast<std::streamoff>(size / 2));
    f.put(static_cast<char>(c ^ 0x40));
    f.close();
    CHECK(!cache.load(key, &note));
    CHECK(note.find("checksum mismatch") != std::string::npos);
  }
  SECTION("cut short") {
    fs::resize_file(file, size - 100);
    CHECK(!cache.load(key, &note));
    CHECK(note.find("truncated") != std::string::npos);
  }
  SECTION("cut to less than a header") {
    fs::resize_file(file, 10);
    CHECK(!cache.load(key, &note));
    CHECK(note.find("truncated") != std::string::npos);
  }
  SECTION("not an index") {
    std::ofstream(file, std::ios::trunc) << std::string(4096, 'x');
    CHECK(!cache.load(key, &note));
    CHECK(note.find("not an index file") != std::string::npos);
  }
}

TEST_CASE("index cache: only a file as its writer left it is spared the checks of every item") {
  const SavedIndex saved;
  const IndexCache& cache = saved.cache;
  const std::string& key = saved.key;
  const fs::path& file = saved.file;
  const fs::path mark = checked_mark_path(file.string());
  std::string note;
  std::unique_ptr<CachedProducts> loaded = cache.load(key, &note);
  REQUIRE(loaded);
  CHECK(loaded->checks == ItemChecks::sizes_only);
  CHECK(loaded->graph.checks == ItemChecks::sizes_only);

  SECTION("without its writer's mark, a reader hashes the file, and it and the readers after it check every item") {
    fs::remove(mark);
    for (int reader = 0; reader < 2; ++reader) {
      loaded = cache.load(key, &note);
      REQUIRE(loaded);
      CHECK(loaded->checks == ItemChecks::every_item);
      CHECK(loaded->graph.checks == ItemChecks::every_item);
      CHECK(fs::exists(mark));  // the first reader's: the second does not hash it again
    }
  }
  SECTION("the same bytes written again: the writer's mark is another file's") {
    std::ifstream in(file, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    in.close();
    std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
    loaded = cache.load(key, &note);
    REQUIRE(loaded);
    CHECK(loaded->checks == ItemChecks::every_item);
  }
}

TEST_CASE("index cache: a core written again has another key") {
  CacheDirectory dir;
  Analysed a;
  const std::string before = dir.cache().key(a.image, SymbolSearchOptions{}, {});
  const fs::path core = dir.path / "app.core";
  fs::last_write_time(core, fs::last_write_time(core) + std::chrono::seconds(1));
  CHECK(dir.cache().key(a.image, SymbolSearchOptions{}, {}) != before);
  SymbolSearchOptions no_debug_files;
  no_debug_files.use_debug_files = false;
  CHECK(dir.cache().key(a.image, no_debug_files, {}) != dir.cache().key(a.image, SymbolSearchOptions{}, {}));
}

TEST_CASE("index cache: the directory keeps the newest indexes only") {
  CacheDirectory dir;
  Analysed a;
  a.analyse();
  const IndexCache cache = dir.cache();
  std::vector<std::string> keys;
  for (std::size_t i = 0; i < IndexCache::kMaxFiles + 2; ++i) {
    keys.push_back("key " + std::to_string(i) + "\n");
    cache.save(keys.back(), a.heap, *a.graph, a.verdicts);
    // Distinct write times, oldest first.
    fs::last_write_time(cache.path_for(keys.back()), fs::file_time_type::clock::now() - std::chrono::hours(100 - i));
  }
  std::size_t kept = 0, marks = 0;
  for (const auto& e : fs::directory_iterator(dir.path / "cache")) {
    kept += e.path().extension() == ".hsindex";
    marks += e.path().extension() == ".checked";
  }
  CHECK(kept == IndexCache::kMaxFiles);
  CHECK(marks == IndexCache::kMaxFiles);  // the evicted indexes' checked marks went with them
  CHECK(fs::exists(cache.path_for(keys.back())));
  CHECK(fs::exists(checked_mark_path(cache.path_for(keys.back()))));
  CHECK(!fs::exists(cache.path_for(keys.front())));
  CHECK(!fs::exists(checked_mark_path(cache.path_for(keys.front()))));
}

TEST_CASE("index cache: an interrupted write leaves no file behind") {
  CacheDirectory dir;
  Analysed a;
  a.analyse();
  const IndexCache cache = dir.cache();
  Progress progress;
  progress.set_interrupt_check([] { return true; });
  progress.begin();
  ProgressScope current(&progress);
  PhaseScope phase(progress, "cache: write");
  CHECK_THROWS_AS(cache.save("key\n", a.heap, *a.graph, a.verdicts), Interrupted);
  progress.end();
  CHECK(fs::is_empty(dir.path / "cache"));  // neither the index nor its temporary file
}

TEST_CASE("index cache: the checksum in parts on all cores is the checksum in one pass") {
  std::vector<std::byte> bytes(64 * 1000 + 37);
  std::uint32_t x = 12345;
  for (std::byte& b : bytes) b = static_cast<std::byte>((x = x * 1103515245u + 12345u) >> 24);
  for (const std::size_t size : {std::size_t{0}, std::size_t{63}, std::size_t{64}, std::size_t{64 * 999 + 1}, bytes.size()}) {
    INFO(size << " bytes");
    const std::span<const std::byte> part(bytes.data(), size);
    IndexChecksum one_pass;
    one_pass.update(part);
    CHECK(IndexChecksum::of(part, 64) == one_pass.finish());  // as many workers as there are cores
    CHECK(IndexChecksum::of(part) == one_pass.finish());      // one worker
  }
}

TEST_CASE("index cache: the checks' sample meets every kind of block of a heap built in a repeating pattern") {
  // CPython's dict of lists, 4,010,068 blocks: a GC-tracked object every fourth block. Sampling each
  // stretch's first block met none of them.
  for (const std::size_t count : {std::size_t{4010068}, std::size_t{4010031}, kSampledBlocks, std::size_t{7}}) {
    INFO(count << " blocks");
    const std::vector<std::size_t> sample = sample_blocks(count);
    REQUIRE(!sample.empty());
    CHECK(sample.front() == 0);
    CHECK(sample.back() == count - 1);
    CHECK(std::is_sorted(sample.begin(), sample.end()));
    CHECK(sample.size() <= kSampledBlocks + 1);
    if (count < kSampledBlocks) continue;
    for (const std::size_t period : {2u, 4u, 8u, 50u}) {
      std::vector<std::size_t> met(period, 0);
      for (const std::size_t b : sample) ++met[b % period];
      for (std::size_t r = 0; r < period; ++r) CHECK(met[r] >= sample.size() / period / 3);
    }
  }
}
