// Heap snapshots over synthetic data: the diff's per-type rows and same-address rules, the steady-growth
// rule and the evolution's order, snapshot files, the store, the SVG chart, and the commands' errors.
#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>
#include <unistd.h>

#include "queries/evolution.h"
#include "queries/heap_snapshot.h"
#include "queries/snapshot_diff.h"
#include "queries/snapshot_file.h"
#include "commands/command_line.h"
#include "fake_image.h"
#include "formatters/render.h"
#include "formatters/markup.h"
#include "formatters/svg/line_chart.h"

using namespace heapscope;

namespace {

// A snapshot from (address, chunk size, type name) triples; totals are summed from the blocks.
HeapSnapshot snapshot_of(const std::string& name, int pid,
                         const std::vector<std::tuple<Address, std::uint64_t, std::string>>& blocks) {
  HeapSnapshot s;
  s.name = name;
  s.pid = pid;
  for (const auto& [address, chunk, type] : blocks) {
    std::uint32_t t = 0;
    while (t < s.types.size() && s.types[t].type != type) ++t;
    if (t == s.types.size()) s.types.push_back({type, 0, 0});
    SnapshotBlock b{address, static_cast<std::uint32_t>(chunk / 16), t};
    ++s.types[t].count;
    s.types[t].bytes += b.usable_size();
    ++s.in_use_blocks;
    s.in_use_bytes += b.usable_size();
    s.blocks.push_back(b);
  }
  std::sort(s.blocks.begin(), s.blocks.end(), [](auto& a, auto& b) { return a.address < b.address; });
  return s;
}

const DiffRow& row_named(const std::vector<DiffRow>& rows, const std::string& name) {
  for (const DiffRow& r : rows)
    if (r.name == name) return r;
  FAIL("no row " << name);
  return rows.front();
}

const AddressDiffRow* address_row(const DiffReport& d, const std::string& type) {
  for (const AddressDiffRow& r : d.new_by_type)
    if (r.type == type) return &r;
  return nullptr;
}

}  // namespace

TEST_CASE("a snapshot block record is 16 bytes and keeps usable sizes") {
  STATIC_REQUIRE(sizeof(SnapshotBlock) == 16);
  SnapshotBlock in_use{0x1000, 4, 7};
  SnapshotBlock mapped{0x2000, 256, 7 | SnapshotBlock::kMmappedBit};
  CHECK(in_use.usable_size() == 56);
  CHECK(mapped.usable_size() == 4096 - 16);
  CHECK(mapped.type() == 7);
  CHECK(mapped.mmapped());
}

TEST_CASE("diff rows per type: before, after and delta, most byte growth first") {
  const HeapSnapshot before = snapshot_of("a", 1, {{0x100, 64, "Entry"}, {0x200, 32, "Config"}, {0x300, 128, "Buffer"}});
  const HeapSnapshot after = snapshot_of("b", 2, {{0x100, 64, "Entry"},
                                                  {0x140, 64, "Entry"},
                                                  {0x180, 64, "Entry"},
                                                  {0x200, 32, "Config"},
                                                  {0x400, 48, "Fresh"}});
  const DiffReport d = diff_snapshots(before, after, {}, nullptr);
  REQUIRE(d.types.size() == 4);
  CHECK(d.types[0].name == "Entry");
  CHECK(d.types[0].before_count == 1);
  CHECK(d.types[0].after_count == 3);
  CHECK(d.types[0].delta_count == 2);
  CHECK(d.types[0].delta_bytes == 2 * 56);
  CHECK(d.types[1].name == "Fresh");
  CHECK(d.types[1].before_bytes == 0);
  CHECK(d.types[2].name == "Config");
  CHECK(d.types[2].delta_bytes == 0);
  CHECK(d.types.back().name == "Buffer");
  CHECK(d.types.back().delta_count == -1);
  CHECK(d.types.back().delta_bytes == -120);
  CHECK_FALSE(d.addresses_compared);
  CHECK(d.new_by_type.empty());

  DiffOptions two_rows;
  two_rows.count = 2;
  const DiffReport cut = diff_snapshots(before, after, two_rows, nullptr);
  CHECK(cut.types.size() == 2);
  CHECK(cut.type_count == 4);
}

TEST_CASE("same-address rule: a reused address with another type or size holds a new block") {
  // Type tables in different orders: blocks match by type name, not by index.
  const HeapSnapshot before = snapshot_of("a", 7, {{0x100, 64, "Other"},
                                                   {0x200, 64, "Entry"},   // kept
                                                   {0x300, 64, "Entry"},   // reused by a Request: new + gone
                                                   {0x400, 64, "Entry"},   // reused by a bigger Entry: new + gone
                                                   {0x500, 32, "Entry"}});  // freed: gone
  const HeapSnapshot after = snapshot_of("b", 7, {{0x200, 64, "Entry"},
                                                  {0x300, 64, "Request"},
                                                  {0x400, 96, "Entry"},
                                                  {0x600, 64, "Entry"},   // new address: new
                                                  {0x100, 64, "Other"}});  // kept
  DiffOptions options;
  options.compare_addresses = true;
  options.samples_per_type = 5;
  std::vector<Address> samples;
  const DiffReport d = diff_snapshots(before, after, options, &samples);
  CHECK(d.addresses_compared);
  CHECK(d.kept_blocks == 2);
  CHECK(d.new_blocks == 3);
  CHECK(d.gone_blocks == 3);
  const AddressDiffRow* entry = address_row(d, "Entry");
  REQUIRE(entry);
  CHECK(entry->new_count == 2);  // 0x400 (another size) and 0x600
  CHECK(entry->new_bytes == 88 + 56);
  CHECK(entry->gone_count == 3);  // 0x300, 0x400, 0x500
  const AddressDiffRow* request = address_row(d, "Request");
  REQUIRE(request);
  CHECK(request->new_count == 1);
  CHECK(request->gone_count == 0);
  CHECK(address_row(d, "Other") == nullptr);
  CHECK(d.new_by_type.front().type == "Entry");  // most new bytes first
  // Samples: the types with the largest net growth first (Request +56 bytes, Entry +144 − 136), each in
  // address order.
  CHECK(samples == std::vector<Address>{0x300, 0x400, 0x600});
}

TEST_CASE("diff samples the types of largest net growth, never one that only churns") {
  // Churn: 8 blocks freed and 8 others allocated (the most new bytes, no growth); Growth: 2 more blocks.
  std::vector<std::tuple<Address, std::uint64_t, std::string>> old_blocks, new_blocks;
  for (Address i = 0; i < 8; ++i) {
    old_blocks.emplace_back(0x1000 + i * 0x100, 256, "Churn");
    new_blocks.emplace_back(0x9000 + i * 0x100, 256, "Churn");
  }
  old_blocks.emplace_back(0x20000, 64, "Growth");
  new_blocks.emplace_back(0x20000, 64, "Growth");
  new_blocks.emplace_back(0x21000, 64, "Growth");
  new_blocks.emplace_back(0x22000, 64, "Growth");
  DiffOptions options;
  options.compare_addresses = true;
  options.samples_per_type = 3;
  std::vector<Address> samples;
  const DiffReport d = diff_snapshots(snapshot_of("a", 5, old_blocks), snapshot_of("b", 5, new_blocks), options, &samples);
  REQUIRE(address_row(d, "Churn"));
  CHECK(address_row(d, "Churn")->new_count == 8);
  CHECK(samples == std::vector<Address>{0x21000, 0x22000});

  // The report says how the samples were chosen.
  DiffReport shown = d;
  shown.samples.push_back({BlockRef{0x21000, 56, "Growth", "dwarf"}, std::nullopt});
  const std::string text = render(shown, OutputFormat::text);
  CHECK(text.find("New blocks of the types with the largest net growth (new bytes less gone bytes)") != std::string::npos);
}

TEST_CASE("same-address rule: blocks of one size and type at one address are the same block") {
  const HeapSnapshot before = snapshot_of("a", 9, {{0x100, 64, "Entry"}, {0x200, 64, "Entry"}});
  const DiffOptions options{true, 0, 3};
  const DiffReport d = diff_snapshots(before, before, options, nullptr);
  CHECK(d.kept_blocks == 2);
  CHECK(d.new_blocks == 0);
  CHECK(d.gone_blocks == 0);
  CHECK(d.new_by_type.empty());
}

TEST_CASE("roots are matched by label across snapshots") {
  HeapSnapshot before = snapshot_of("a", 1, {});
  HeapSnapshot after = snapshot_of("b", 1, {});
  before.roots = {{"global g_cache in app", "global", 10, 1000}, {"stack of thread 1", "stack", 1, 10}};
  after.roots = {{"stack of thread 1", "stack", 1, 10}, {"global g_cache in app", "global", 30, 3000}};
  const DiffReport d = diff_snapshots(before, after, {}, nullptr);
  REQUIRE(d.roots.size() == 2);
  CHECK(d.roots[0].name == "global g_cache in app");
  CHECK(d.roots[0].kind == "global");
  CHECK(d.roots[0].delta_bytes == 2000);
  CHECK(d.roots[0].delta_count == 20);
  CHECK(row_named(d.roots, "stack of thread 1").delta_bytes == 0);
}

TEST_CASE("steady growth: larger at every point than at the one before, over at least two steps") {
  using V = std::vector<std::uint64_t>;
  CHECK(grows_steadily(V{1, 2, 3}));
  CHECK(grows_steadily(V{0, 10, 11, 500}));  // absent at first, then growing
  CHECK_FALSE(grows_steadily(V{1, 2, 2}));   // one flat step
  CHECK_FALSE(grows_steadily(V{3, 2, 4}));   // shrank once
  CHECK_FALSE(grows_steadily(V{5, 9}));      // a single step is no trend
  CHECK_FALSE(grows_steadily(V{5}));
  CHECK_FALSE(grows_steadily(V{}));
}

TEST_CASE("evolution: steady growers first, then by final bytes or growth, and -n cuts") {
  // "Big" is largest at the end but dipped once; "Cache" grew at every step; "Churn" came and went.
  const HeapSnapshot p1 = snapshot_of("p1", 1, {{0x100, 1024, "Big"}, {0x600, 64, "Cache"}, {0x700, 512, "Churn"}});
  const HeapSnapshot p2 = snapshot_of("p2", 1, {{0x600, 64, "Cache"}, {0x640, 64, "Cache"}, {0x900, 512, "Churn"}});
  const HeapSnapshot p3 = snapshot_of("p3", 1, {{0x100, 4096, "Big"},
                                                {0x600, 64, "Cache"},
                                                {0x640, 64, "Cache"},
                                                {0x680, 64, "Cache"}});
  const std::vector<const HeapSnapshot*> points{&p1, &p2, &p3};
  const EvolutionReport by_final = build_evolution(points, EvolutionOrder::final_bytes, 0);
  REQUIRE(by_final.points.size() == 3);
  CHECK(by_final.points[1].name == "p2");
  REQUIRE(by_final.series.size() == 3);
  CHECK(by_final.series[0].type == "Cache");
  CHECK(by_final.series[0].steady);
  CHECK(by_final.series[0].bytes == std::vector<std::uint64_t>{56, 112, 168});
  CHECK(by_final.series[0].counts == std::vector<std::uint64_t>{1, 2, 3});
  CHECK(by_final.series[1].type == "Big");
  CHECK_FALSE(by_final.series[1].steady);
  CHECK(by_final.series[1].bytes == std::vector<std::uint64_t>{1016, 0, 4088});
  CHECK(by_final.series[2].type == "Churn");
  CHECK(by_final.series[2].growth_bytes == -504);

  const EvolutionReport by_growth = build_evolution(points, EvolutionOrder::growth, 2);
  CHECK(by_growth.type_count == 3);
  REQUIRE(by_growth.series.size() == 2);
  CHECK(by_growth.series[0].type == "Cache");
  CHECK(by_growth.series[1].type == "Big");
  CHECK(by_growth.by == "growth");
}

TEST_CASE("the snapshot store keeps names unique and the order of saving") {
  SnapshotStore store;
  store.save(snapshot_of("a", 1, {{0x100, 64, "X"}}));
  store.save(snapshot_of("b", 1, {}));
  store.save(snapshot_of("a", 1, {{0x100, 64, "X"}, {0x200, 64, "X"}}));  // replaces, becomes newest
  const auto all = store.all();
  REQUIRE(all.size() == 2);
  CHECK(all[0]->name == "b");
  CHECK(all[1]->name == "a");
  CHECK(store.find("a")->blocks.size() == 2);
  CHECK(store.drop("b"));
  CHECK_FALSE(store.drop("b"));
  CHECK(store.find("b") == nullptr);
}

TEST_CASE("snapshot files round-trip, and a bad file is a clear error") {
  HeapSnapshot s = snapshot_of("a", 42, {{0x100, 64, "Entry"}, {0x2000, 4096, "Buffer"}});
  s.blocks[1].type_and_flag |= SnapshotBlock::kMmappedBit;
  s.roots = {{"global g in app", "global", 2, 4152}};
  s.target = "core file a.core (pid 42, app)";
  s.capture_time_ns = 1'700'000'000'123'456'789;
  const std::string path = "/tmp/heapscope-unit-snapshot-" + std::to_string(::getpid()) + ".json";
  write_snapshot_file(path, s);
  const HeapSnapshot back = read_snapshot_file(path);
  CHECK(back.name == s.name);
  CHECK(back.pid == 42);
  CHECK(back.target == s.target);
  CHECK(back.capture_time_ns == s.capture_time_ns);
  CHECK(back.in_use_bytes == s.in_use_bytes);
  REQUIRE(back.types.size() == 2);
  CHECK(back.types[1].type == "Buffer");
  REQUIRE(back.roots.size() == 1);
  CHECK(back.roots[0].bytes == 4152);
  REQUIRE(back.blocks.size() == 2);
  CHECK(back.blocks[1].mmapped());
  CHECK(back.blocks[1].usable_size() == 4080);
  { std::ofstream(path) << "{\"heapscope_snapshot\": 1, \"name\": \"x\"}"; }
  CHECK_THROWS_WITH(read_snapshot_file(path), Catch::Contains(path) && Catch::Contains("not a usable snapshot file"));
  { std::ofstream(path) << "[1, 2"; }
  CHECK_THROWS_AS(read_snapshot_file(path), AnalysisError);
  std::remove(path.c_str());
  CHECK_THROWS_WITH(read_snapshot_file(path), Catch::Contains("cannot read"));
}

TEST_CASE("the evolution chart has one series group per type and escapes names") {
  EvolutionReport r;
  r.points = {SnapshotInfo{"c1", "", 1, 0}, SnapshotInfo{"c2", "", 1, 1'000'000'000}};
  r.series = {{"std::map<int, Entry<&>>", {100, 5000}, {1, 50}, 4900, true}, {"Other", {10, 10}, {1, 1}, 0, false}};
  const std::string svg = render(r, OutputFormat::svg);
  CHECK_THAT(svg, Catch::StartsWith("<?xml"));
  std::size_t groups = 0;
  for (std::size_t at = svg.find("class=\"series\""); at != std::string::npos; at = svg.find("class=\"series\"", at + 1))
    ++groups;
  CHECK(groups == 2);
  CHECK_THAT(svg, Catch::Contains("std::map&lt;int, Entry&lt;&amp;&gt;&gt;"));
  CHECK_THAT(svg, Catch::Contains("data-highlighted=\"true\""));
  CHECK_THAT(svg, Catch::Contains("KiB"));  // the y axis in human sizes
  CHECK(markup_escape("a<'\">&") == "a&lt;&#39;&quot;&gt;&amp;");  // &#39; is XML too
}

TEST_CASE("snapshot commands: list on an empty store, clear errors for unknown names and no heap") {
  auto image = std::make_shared<testing::FakeImage>();
  Session session(image, {});
  const CommandResult list = execute_command_line(session, {"snapshot", "list"});
  CHECK(list.exit_code == 0);
  CHECK_THAT(list.output, Catch::Contains("No saved snapshots"));
  const CommandResult missing = execute_command_line(session, {"snapshot", "diff", "before"});
  CHECK(missing.exit_code != 0);
  CHECK_THAT(missing.error, Catch::Contains("no snapshot named 'before'"));
  const CommandResult no_name = execute_command_line(session, {"snapshot", "save"});
  CHECK_THAT(no_name.error, Catch::Contains("needs a NAME"));
  const CommandResult bad_verb = execute_command_line(session, {"snapshot", "frobnicate"});
  CHECK(bad_verb.exit_code != 0);
  const CommandResult no_heap = execute_command_line(session, {"snapshot", "save", "a"});  // the fake image has no libc
  CHECK(no_heap.exit_code != 0);
  CHECK_THAT(no_heap.error, Catch::Contains("libc"));
}

TEST_CASE("sessions given one store share their snapshots") {
  auto store = std::make_shared<SnapshotStore>();
  store->save(snapshot_of("kept", 1, {}));
  SessionOptions options;
  options.snapshots = store;
  Session later(std::make_shared<testing::FakeImage>(), options);
  const CommandResult list = execute_command_line(later, {"snapshot", "list", "--json"});
  CHECK(list.exit_code == 0);
  CHECK_THAT(list.output, Catch::Contains("\"name\": \"kept\""));
  const CommandResult drop = execute_command_line(later, {"snapshot", "drop", "kept"});
  CHECK(drop.exit_code == 0);
  CHECK(store->all().empty());
}
