// ElfCoreImage over hand-made cores (core_builder.h) and over a real gcore of /bin/sleep.
#include <elf.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "core_builder.h"
#include "sources/elf_core_image.h"
#include "image/memory_cursor.h"

using namespace heapscope;
using namespace heapscope::testing;

namespace {

struct Opened {
  std::unique_ptr<ElfCoreImage> image;
  std::string error;
};

Opened open_core(const std::string& path, const CoreOpenOptions& opts = {}) {
  Opened o;
  o.image = ElfCoreImage::open(path, opts, &o.error);
  return o;
}

Opened write_and_open(const CoreBuilder& core, const TempFile& file, const CoreOpenOptions& opts = {}) {
  core.write(file.path());
  return open_core(file.path(), opts);
}

bool any_warning_contains(const Image& image, const std::string& text) {
  for (const std::string& w : image.warnings())
    if (w.find(text) != std::string::npos) return true;
  return false;
}

std::string all_warnings(const Image& image) {
  std::string out;
  for (const std::string& w : image.warnings()) out += w + "\n";
  return out;
}

std::vector<std::byte> pattern(std::size_t size, std::uint8_t seed) {
  std::vector<std::byte> out(size);
  for (std::size_t i = 0; i < size; ++i) out[i] = static_cast<std::byte>((i * 7 + seed) & 0xff);
  return out;
}

const Module* find_module(const Image& image, const std::string& path_part) {
  for (const Module& m : image.modules())
    if (m.path.find(path_part) != std::string::npos) return &m;
  return nullptr;
}

constexpr Address kA = 0x10000;  // two adjacent segments, then one after a gap
constexpr Address kB = 0x11000;
constexpr Address kC = 0x20000;

CoreBuilder three_segment_core() {
  CoreBuilder core;
  core.process(100, "demo").thread(100);
  core.segment(kA, 0x1000, 0, PF_R | PF_W).put_bytes(kA, pattern(0x1000, 1).data(), 0x1000);
  core.segment(kB, 0x1000, 0, PF_R | PF_X).put_bytes(kB, pattern(0x1000, 2).data(), 0x1000);
  core.segment(kC, 0x2000, 0, PF_R).put_bytes(kC, pattern(0x2000, 3).data(), 0x2000);
  return core;
}

}  // namespace

TEST_CASE("ElfCoreImage: regions come from PT_LOAD segments", "[coredump]") {
  TempFile file("regions.core");
  auto [image, error] = write_and_open(three_segment_core(), file);
  REQUIRE(image);
  CHECK_FALSE(image->truncated());
  const auto& regions = image->regions();
  REQUIRE(regions.size() == 3);
  CHECK(regions[0].start == kA);
  CHECK(regions[0].end == kA + 0x1000);
  CHECK(regions[0].writable);
  CHECK_FALSE(regions[0].executable);
  CHECK(regions[1].start == kB);
  CHECK(regions[1].executable);
  CHECK_FALSE(regions[1].writable);
  CHECK(regions[2].start == kC);
  CHECK(regions[2].size() == 0x2000);
  for (const MemoryRegion& r : regions) {
    CHECK(r.bytes_present);
    CHECK(r.readable);
    CHECK(r.backing_path.empty());
  }
  CHECK(image->region_at(kB + 5) == &regions[1]);
  CHECK(image->region_at(kB + 0x1000) == nullptr);
}

TEST_CASE("ElfCoreImage: reads cross adjacent segments and stop at gaps", "[coredump]") {
  TempFile file("reads.core");
  auto [image, error] = write_and_open(three_segment_core(), file);
  REQUIRE(image);
  const auto a = pattern(0x1000, 1), b = pattern(0x1000, 2), c = pattern(0x2000, 3);

  std::byte buf[16];
  REQUIRE(image->read(kA + 0xff8, buf, 16) == 16);
  CHECK(std::memcmp(buf, a.data() + 0xff8, 8) == 0);
  CHECK(std::memcmp(buf + 8, b.data(), 8) == 0);

  CHECK(image->read(kB + 0xffc, buf, 16) == 4);  // then the unmapped gap
  CHECK(image->read(kB + 0x1000, buf, 16) == 0);
  CHECK(image->read(0, buf, 16) == 0);
  CHECK(image->read(~Address{0} - 4, buf, 16) == 0);

  REQUIRE(image->read(kC + 0x1ff0, buf, 16) == 16);
  CHECK(std::memcmp(buf, c.data() + 0x1ff0, 16) == 0);

  std::uint64_t expected;
  std::memcpy(&expected, c.data() + 0x100, 8);
  CHECK(image->read_u64(kC + 0x100) == expected);

  MemoryCursor cursor(*image);
  CHECK(cursor.u64(kC + 0x100) == expected);
  CHECK_FALSE(cursor.u64(kC + 0x2000).has_value());
  // Unreadable is not zero: the namers tell a null pointer from memory the core lacks.
  CHECK_FALSE(cursor.u64(kC + 0x2000) == 0);
  CHECK(cursor.u64(kC + 0x2000).value_or(7) == 7);
  CHECK(cursor.u64(kC + 0x100).value_or(7) == expected);
}

TEST_CASE("ElfCoreImage: view is zero-copy inside one segment and empty across segments", "[coredump]") {
  TempFile file("view.core");
  auto [image, error] = write_and_open(three_segment_core(), file);
  REQUIRE(image);
  const auto a = pattern(0x1000, 1);

  const auto v = image->view(kA + 0x10, 32);
  REQUIRE(v.size() == 32);
  CHECK(std::memcmp(v.data(), a.data() + 0x10, 32) == 0);
  CHECK(image->view(kA + 0x10, 32).data() == v.data());  // the same mapped bytes, not a copy
  CHECK(image->view(kA, 0x1000).size() == 0x1000);

  CHECK(image->view(kA + 0xff8, 16).empty());  // crosses into the next segment
  CHECK(image->view(kB + 0xff8, 16).empty());  // runs into the gap
  CHECK(image->view(kB + 0x1000, 8).empty());  // unmapped
}

TEST_CASE("ElfCoreImage: threads, registers, process and auxv", "[coredump]") {
  CoreBuilder core;
  const std::string command_line =
      "a-long-process-name-beyond-16 --listen 127.0.0.1:6379 --config /etc/a-config-file-with-a-long-name.conf -v";
  core.process(4242, "a-long-process-name-beyond-16", command_line).auxv(AT_PAGESZ, 4096).auxv(AT_ENTRY, 0x401000);
  core.thread(4242, {{Reg::fs_base, 0x7ffff7d8a740}, {Reg::rip, 0x401136}, {Reg::rsp, 0x7fffffffe3a0}});
  core.thread(4243, {{Reg::fs_base, 0x7ffff758a640}});
  core.segment(kA, 0x1000);
  TempFile file("threads.core");
  auto [image, error] = write_and_open(core, file);
  REQUIRE(image);

  CHECK(image->pid() == 4242);
  CHECK(image->process_name() == "a-long-process-n");  // pr_fname holds 16 bytes
  CHECK(image->command_line() == command_line.substr(0, 80));  // pr_psargs holds 80
  CHECK(image->description() == "core file " + file.path() + " (pid 4242, " + command_line.substr(0, 80) + ")");
  REQUIRE(image->threads().size() == 2);
  const ThreadState& main_thread = image->threads()[0];
  CHECK(main_thread.tid == 4242);
  CHECK(main_thread.fs_base() == 0x7ffff7d8a740);
  CHECK(main_thread.reg(Reg::rip) == 0x401136);
  CHECK(main_thread.sp() == 0x7fffffffe3a0);
  CHECK(main_thread.name.empty());
  CHECK(image->threads()[1].tid == 4243);
  CHECK(image->threads()[1].fs_base() == 0x7ffff758a640);

  REQUIRE(image->auxv().size() == 2);
  CHECK(image->auxv_value(AT_PAGESZ) == 4096u);
  CHECK(image->auxv_value(AT_ENTRY) == 0x401000u);
  CHECK_FALSE(image->auxv_value(AT_BASE).has_value());
}

TEST_CASE("ElfCoreImage: every register lands in user_regs_struct order", "[coredump]") {
  CoreBuilder core;
  core.process(1, "regs");
  ThreadState expected;
  for (int i = 0; i < static_cast<int>(Reg::count); ++i) expected.regs[i] = 0x1000 + 0x11 * i;
  core.thread(1, {{Reg::r15, expected.regs[0]},      {Reg::r14, expected.regs[1]},     {Reg::r13, expected.regs[2]},
                  {Reg::r12, expected.regs[3]},      {Reg::rbp, expected.regs[4]},     {Reg::rbx, expected.regs[5]},
                  {Reg::r11, expected.regs[6]},      {Reg::r10, expected.regs[7]},     {Reg::r9, expected.regs[8]},
                  {Reg::r8, expected.regs[9]},       {Reg::rax, expected.regs[10]},    {Reg::rcx, expected.regs[11]},
                  {Reg::rdx, expected.regs[12]},     {Reg::rsi, expected.regs[13]},    {Reg::rdi, expected.regs[14]},
                  {Reg::orig_rax, expected.regs[15]}, {Reg::rip, expected.regs[16]},   {Reg::cs, expected.regs[17]},
                  {Reg::eflags, expected.regs[18]},  {Reg::rsp, expected.regs[19]},    {Reg::ss, expected.regs[20]},
                  {Reg::fs_base, expected.regs[21]}, {Reg::gs_base, expected.regs[22]}, {Reg::ds, expected.regs[23]},
                  {Reg::es, expected.regs[24]},      {Reg::fs, expected.regs[25]},     {Reg::gs, expected.regs[26]}});
  core.segment(kA, 0x1000);
  TempFile file("regs.core");
  core.write(file.path());

  // Check the raw note bytes too, so the builder and the reader cannot agree on a wrong layout.
  std::string error;
  auto raw = ElfFile::open(file.path(), &error);
  REQUIRE(raw);
  bool saw_prstatus = false;
  for (const GElf_Phdr& ph : raw->program_headers()) {
    if (ph.p_type != PT_NOTE) continue;
    for_each_note(raw->file_range(ph.p_offset, ph.p_filesz), [&](const ElfNote& n) {
      if (n.type != NT_PRSTATUS) return;
      saw_prstatus = true;
      REQUIRE(n.desc.size() == 336);
      std::uint64_t rip, fs_base;
      std::memcpy(&rip, n.desc.data() + 112 + 16 * 8, 8);
      std::memcpy(&fs_base, n.desc.data() + 112 + 21 * 8, 8);
      CHECK(rip == expected.regs[16]);
      CHECK(fs_base == expected.regs[21]);
    });
  }
  CHECK(saw_prstatus);

  auto [image, open_error] = open_core(file.path());
  REQUIRE(image);
  REQUIRE(image->threads().size() == 1);
  for (int i = 0; i < static_cast<int>(Reg::count); ++i) {
    INFO(register_name(static_cast<Reg>(i)));
    CHECK(image->threads()[0].regs[i] == expected.regs[i]);
  }
}

namespace {

CoreBuilder::VectorHalves vector_halves(std::uint64_t base) {
  CoreBuilder::VectorHalves halves{};
  for (std::size_t r = 0; r < halves.size(); ++r) halves[r] = {base + 0x100 * r, base + 0x100 * r + 8};
  return halves;
}

void check_vector_lanes(const ThreadState& t, const CoreBuilder::VectorHalves& halves, int first_lane) {
  for (std::size_t r = 0; r < halves.size(); ++r) {
    INFO(vector_register_name(static_cast<int>(r), first_lane));
    CHECK(t.vector.lanes[r][first_lane] == halves[r][0]);
    CHECK(t.vector.lanes[r][first_lane + 1] == halves[r][1]);
  }
}

}  // namespace

TEST_CASE("ElfCoreImage: each thread's vector registers come from the notes after its NT_PRSTATUS", "[coredump]") {
  const auto xmm1 = vector_halves(0x5000), xmm2 = vector_halves(0x6000), ymm2 = vector_halves(0x7000);
  CoreBuilder core;
  core.process(1, "vectors");
  core.thread(1).fxsave_note(xmm1);                                       // SSE only: the FXSAVE area
  core.thread(2).fxsave_note(xmm1).xsave_note(xmm2, &ymm2);               // the XSAVE area wins
  core.thread(3);                                                         // none
  core.segment(kA, 0x1000);
  TempFile file("vectors.core");
  auto [image, error] = write_and_open(core, file);
  REQUIRE(image);
  INFO(all_warnings(*image));
  CHECK_FALSE(any_warning_contains(*image, "vector register"));
  REQUIRE(image->threads().size() == 3);
  const ThreadState& sse = image->threads()[0];
  CHECK(sse.vector.lanes_read == VectorRegisters::kXmmLanes);
  check_vector_lanes(sse, xmm1, 0);
  const ThreadState& avx = image->threads()[1];
  CHECK(avx.vector.lanes_read == VectorRegisters::kYmmLanes);
  check_vector_lanes(avx, xmm2, 0);
  check_vector_lanes(avx, ymm2, 2);
  CHECK(image->threads()[2].vector.lanes_read == 0);
}

TEST_CASE("ElfCoreImage: an XSAVE area whose AVX state is in its initial state has zero upper halves", "[coredump]") {
  const auto xmm = vector_halves(0x5000);
  CoreBuilder core;
  core.process(1, "vectors").thread(1).xsave_note(xmm, nullptr);
  core.segment(kA, 0x1000);
  TempFile file("vectors-init.core");
  auto [image, error] = write_and_open(core, file);
  REQUIRE(image);
  const ThreadState& t = image->threads().at(0);
  CHECK(t.vector.lanes_read == VectorRegisters::kYmmLanes);
  check_vector_lanes(t, xmm, 0);
  check_vector_lanes(t, CoreBuilder::VectorHalves{}, 2);
}

TEST_CASE("ElfCoreImage: wrong-size vector register notes give warnings, not registers or crashes", "[coredump]") {
  const auto xmm = vector_halves(0x5000), ymm = vector_halves(0x7000);
  CoreBuilder core;
  core.process(1, "vectors");
  core.thread(1).fxsave_note(xmm, 100);          // cut far short of the FXSAVE area
  core.thread(2).xsave_note(xmm, &ymm, 600);     // the header, but not the AVX state it marks present
  core.thread(3).xsave_note(xmm, &ymm, 300);     // not even the header
  core.segment(kA, 0x1000);
  TempFile file("vectors-bad.core");
  auto [image, error] = write_and_open(core, file);
  REQUIRE(image);
  INFO(all_warnings(*image));
  REQUIRE(image->threads().size() == 3);
  CHECK(image->threads()[0].vector.lanes_read == 0);
  CHECK(any_warning_contains(*image, "(NT_PRFPREG) of thread tid 1 is damaged: the FXSAVE area is 100 bytes"));
  CHECK(image->threads()[1].vector.lanes_read == VectorRegisters::kXmmLanes);
  check_vector_lanes(image->threads()[1], xmm, 0);
  CHECK(any_warning_contains(
      *image, "(NT_X86_XSTATE) of thread tid 2 is damaged: the XSAVE area is 600 bytes, too short for the AVX state"));
  CHECK(image->threads()[2].vector.lanes_read == 0);
  CHECK(any_warning_contains(*image, "(NT_X86_XSTATE) of thread tid 3 is damaged: the XSAVE area is 300 bytes"));
}

TEST_CASE("ElfCoreImage: a module file with the process's build-id supplies omitted bytes", "[coredump]") {
  const std::vector<std::uint8_t> id = {0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa};
  const auto payload = pattern(0x1800, 9);
  const auto module_bytes = make_elf_module(id, payload);
  TempFile module_file("libdemo.so");
  write_file(module_file.path(), module_bytes);

  constexpr Address base = 0x7f0000400000;
  CoreBuilder core;
  core.process(7, "demo").thread(7);
  map_module(core, module_file.path(), base, module_bytes);
  TempFile file("module.core");
  auto [image, error] = write_and_open(core, file);
  REQUIRE(image);
  INFO(all_warnings(*image));
  CHECK_FALSE(any_warning_contains(*image, module_file.path()));

  const Module* module = find_module(*image, module_file.path());
  REQUIRE(module);
  CHECK(module->file_on_disk == module_file.path());
  CHECK(module->build_id == "112233445566778899aa");
  CHECK(module->load_bias == base);
  CHECK(module->start == base);
  CHECK(module->end == base + 0x3000);
  CHECK_FALSE(module->is_main_executable);

  std::byte buf[0x20];
  REQUIRE(image->read(base + kModulePayloadOffset, buf, sizeof buf) == sizeof buf);
  CHECK(std::memcmp(buf, payload.data(), sizeof buf) == 0);
  // From the core's saved first page straight into the file-backed rest.
  REQUIRE(image->read(base + kModulePayloadOffset - 8, buf, 16) == 16);
  CHECK(std::memcmp(buf + 8, payload.data(), 8) == 0);
  // The file ends inside the last page: the rest of that page reads as zeros, as in the process.
  REQUIRE(image->read(base + 0x27f8, buf, 16) == 16);
  CHECK(std::memcmp(buf, payload.data() + 0x17f8, 8) == 0);
  CHECK(buf[8] == std::byte{0});
  CHECK(image->read(base + 0x3000, buf, 8) == 0);

  const MemoryRegion* region = image->region_at(base + 0x2000);
  REQUIRE(region);
  CHECK(region->bytes_present);
  CHECK(region->backing_path == module_file.path());
  CHECK(region->executable);
}

TEST_CASE("ElfCoreImage: a module file with another build-id is not used", "[coredump]") {
  const auto payload = pattern(0x1000, 4);
  const auto loaded = make_elf_module({0xaa, 0xbb, 0xcc, 0xdd}, payload);
  const auto on_disk = make_elf_module({0x01, 0x02, 0x03, 0x04}, payload);
  TempFile module_file("libfoo.so");
  write_file(module_file.path(), on_disk);

  constexpr Address base = 0x7f0000600000;
  CoreBuilder core;
  core.process(8, "demo").thread(8);
  map_module(core, module_file.path(), base, loaded);
  TempFile file("mismatch.core");
  auto [image, error] = write_and_open(core, file);
  REQUIRE(image);

  const Module* module = find_module(*image, module_file.path());
  REQUIRE(module);
  CHECK(module->file_on_disk.empty());
  CHECK(module->build_id == "aabbccdd");
  INFO(all_warnings(*image));
  CHECK(any_warning_contains(*image, "build-id mismatch for " + module_file.path() +
                                         ": core has aabbccdd, file has 01020304 — its symbols and bytes are not used"));

  std::byte buf[16];
  CHECK(image->read(base + 0x10, buf, 16) == 16);  // the saved first page
  CHECK(image->read(base + kModulePayloadOffset, buf, 16) == 0);
  CHECK(image->read(base + kModulePayloadOffset - 8, buf, 16) == 8);
  const MemoryRegion* omitted = image->region_at(base + kModulePayloadOffset);
  REQUIRE(omitted);
  CHECK_FALSE(omitted->bytes_present);
}

TEST_CASE("ElfCoreImage: a missing module file leaves omitted bytes absent with a warning", "[coredump]") {
  const auto loaded = make_elf_module({0x42, 0x42}, pattern(0x1000, 5));
  const std::string missing = "/nonexistent/heapscope-test/libgone.so.1";
  constexpr Address base = 0x7f0000800000;
  CoreBuilder core;
  core.process(9, "demo").thread(9);
  map_module(core, missing, base, loaded);
  TempFile file("missing-module.core");
  auto [image, error] = write_and_open(core, file);
  REQUIRE(image);

  const Module* module = find_module(*image, missing);
  REQUIRE(module);
  CHECK(module->file_on_disk.empty());
  CHECK(module->build_id == "4242");
  CHECK(any_warning_contains(*image, missing));
  std::byte buf[8];
  CHECK(image->read(base + kModulePayloadOffset, buf, 8) == 0);
}

TEST_CASE("ElfCoreImage: gdb-style cores list omitted mappings only in NT_FILE", "[coredump]") {
  // gdb writes no PT_LOAD for unmodified read-only file mappings, and NT_FILE with page size 1.
  const auto payload = pattern(0x2000, 6);
  const auto module_bytes = make_elf_module({0x5e, 0x5e, 0x5e, 0x5e}, payload);
  TempFile module_file("libgdbstyle.so");
  write_file(module_file.path(), module_bytes);
  constexpr Address base = 0x7f0000a00000;

  CoreBuilder core;
  core.process(10, "demo").thread(10).nt_file_page_size(1);
  core.file_mapping(base, base + 0x1000, 0, module_file.path());
  core.file_mapping(base + 0x1000, base + 0x3000, 0x1000, module_file.path());
  core.segment(base, 0x1000, 0, PF_R).put_bytes(base, module_bytes.data(), 0x1000);
  core.file_mapping(0x7f0000c00000, 0x7f0000c01000, 0, "/usr/lib/locale/C.utf8/LC_NAME");
  TempFile file("gdb-style.core");
  auto [image, error] = write_and_open(core, file);
  REQUIRE(image);
  INFO(all_warnings(*image));

  const MemoryRegion* text = image->region_at(base + 0x1800);
  REQUIRE(text);
  CHECK(text->start == base + 0x1000);
  CHECK(text->end == base + 0x3000);
  CHECK(text->bytes_present);
  CHECK(text->executable);  // learned from the module's program header
  CHECK(text->backing_path == module_file.path());
  CHECK(text->file_offset == 0x1000);
  std::byte buf[16];
  REQUIRE(image->read(base + 0x2000, buf, 16) == 16);
  CHECK(std::memcmp(buf, payload.data() + 0x1000, 16) == 0);
  const auto v = image->view(base + 0x2000, 16);  // straight from the mapped module file
  REQUIRE(v.size() == 16);
  CHECK(std::memcmp(v.data(), payload.data() + 0x1000, 16) == 0);

  // A data file (not ELF) is a region without bytes, not a module.
  const MemoryRegion* locale = image->region_at(0x7f0000c00000);
  REQUIRE(locale);
  CHECK_FALSE(locale->bytes_present);
  CHECK(locale->backing_path == "/usr/lib/locale/C.utf8/LC_NAME");
  CHECK(find_module(*image, "LC_NAME") == nullptr);
  REQUIRE(image->modules().size() == 1);
  CHECK(image->modules()[0].end == base + 0x3000);
}

TEST_CASE("ElfCoreImage: the main executable is found by AT_ENTRY and --exe replaces its file", "[coredump]") {
  const std::vector<std::uint8_t> id = {0xe0, 0xe1, 0xe2, 0xe3};
  const auto exe_bytes = make_elf_module(id, pattern(0x1000, 7));
  TempFile exe_file("exe-copy");
  write_file(exe_file.path(), exe_bytes);
  const std::string recorded = "/nonexistent/build-machine/bin/server";
  constexpr Address base = 0x555555554000;

  CoreBuilder core;
  core.process(11, "server").thread(11).auxv(AT_ENTRY, base + kModulePayloadOffset + 0x20);
  map_module(core, recorded, base, exe_bytes);
  TempFile file("exe.core");
  core.write(file.path());

  SECTION("without --exe the recorded path is missing") {
    auto [image, error] = open_core(file.path());
    REQUIRE(image);
    const Module* exe = image->main_executable();
    REQUIRE(exe);
    CHECK(exe->path == recorded);
    CHECK(exe->file_on_disk.empty());
    CHECK(any_warning_contains(*image, recorded));
  }
  SECTION("--exe with the same build-id is used") {
    CoreOpenOptions opts;
    opts.executable = exe_file.path();
    auto [image, error] = open_core(file.path(), opts);
    REQUIRE(image);
    const Module* exe = image->main_executable();
    REQUIRE(exe);
    CHECK(exe->path == recorded);
    CHECK(exe->file_on_disk == exe_file.path());
    CHECK(image->read_u64(base + kModulePayloadOffset).has_value());
  }
  SECTION("--exe with another build-id is refused") {
    TempFile other("other-exe");
    write_file(other.path(), make_elf_module({0x99}, pattern(0x1000, 7)));
    CoreOpenOptions opts;
    opts.executable = other.path();
    auto [image, error] = open_core(file.path(), opts);
    REQUIRE(image);
    CHECK(image->main_executable()->file_on_disk.empty());
    CHECK(any_warning_contains(*image, "build-id mismatch for " + recorded));
    CHECK_FALSE(image->read_u64(base + kModulePayloadOffset).has_value());
  }
}

TEST_CASE("ElfCoreImage: path_map redirects module paths", "[coredump]") {
  const auto module_bytes = make_elf_module({0x31, 0x41, 0x59}, pattern(0x1000, 8));
  TempFile module_file("libmapped.so");
  write_file(module_file.path(), module_bytes);
  const std::filesystem::path real(module_file.path());
  const std::string recorded = "/sysroot-of-another-machine/" + real.filename().string();
  constexpr Address base = 0x7f0000e00000;

  CoreBuilder core;
  core.process(12, "demo").thread(12);
  map_module(core, recorded, base, module_bytes);
  TempFile file("pathmap.core");
  core.write(file.path());
  CoreOpenOptions opts;
  opts.path_map = {{"/sysroot-of-another-machine", real.parent_path().string()}};
  auto [image, error] = open_core(file.path(), opts);
  REQUIRE(image);
  const Module* module = find_module(*image, recorded);
  REQUIRE(module);
  CHECK(module->file_on_disk == module_file.path());
}

TEST_CASE("ElfCoreImage: a truncated core opens with the missing bytes marked", "[coredump]") {
  CoreBuilder core;
  core.process(13, "demo").thread(13);
  core.segment(kA, 0x1000).fill(kA, 0x1000, 0xaa);
  core.segment(kC, 0x3000).fill(kC, 0x3000, 0xcc);
  TempFile file("truncated.core");
  const CoreLayout layout = core.write(file.path());
  truncate_file(file.path(), layout.segment_offsets[1] + 0x1800);

  auto [image, error] = open_core(file.path());
  REQUIRE(image);
  CHECK(image->truncated());
  CHECK(image->missing_bytes() == 0x1800);
  INFO(all_warnings(*image));
  CHECK(any_warning_contains(*image, "truncated"));
  CHECK(any_warning_contains(*image, "6144 bytes"));

  std::byte buf[16];
  CHECK(image->read(kA, buf, 16) == 16);
  CHECK(image->read(kC + 0x17f8, buf, 16) == 8);
  CHECK(buf[0] == std::byte{0xcc});
  CHECK(image->read(kC + 0x2000, buf, 16) == 0);

  const MemoryRegion* present = image->region_at(kC);
  const MemoryRegion* missing = image->region_at(kC + 0x1800);
  REQUIRE(present);
  REQUIRE(missing);
  CHECK(present->bytes_present);
  CHECK(present->end == kC + 0x1800);
  CHECK_FALSE(missing->bytes_present);
  CHECK(missing->end == kC + 0x3000);
  CHECK(image->view(kC + 0x17f8, 16).empty());
}

TEST_CASE("ElfCoreImage: a core truncated before its notes opens with its memory and no threads", "[coredump]") {
  CoreBuilder core;
  core.process(14, "demo").thread(14);
  core.segment(kA, 0x1000);
  TempFile file("notes-gone.core");
  const CoreLayout layout = core.write(file.path());
  truncate_file(file.path(), layout.notes_offset);
  auto [image, error] = open_core(file.path());
  REQUIRE(image);
  CHECK(image->threads().empty());
  CHECK(image->truncated());
  CHECK(std::any_of(image->warnings().begin(), image->warnings().end(),
                    [](const std::string& w) { return w.find("truncated before its notes") != std::string::npos; }));
  CHECK(image->region_at(kA));  // its bytes depend on where the builder put them; the e2e test reads a real one

  truncate_file(file.path(), 100);  // inside the program headers
  auto [image2, error2] = open_core(file.path());
  CHECK_FALSE(image2);
  CHECK(error2.find("truncated") != std::string::npos);
}

TEST_CASE("ElfCoreImage: files that are not x86-64 ELF cores are refused with one clear sentence", "[coredump]") {
  SECTION("missing file") {
    auto [image, error] = open_core("/nonexistent/heapscope/core.1");
    CHECK_FALSE(image);
    CHECK(error.find("cannot open /nonexistent/heapscope/core.1") != std::string::npos);
  }
  SECTION("not an ELF file") {
    TempFile file("text.core");
    std::ofstream(file.path()) << "this is a text file, long enough to hold an ELF header but not one.\n";
    auto [image, error] = open_core(file.path());
    CHECK_FALSE(image);
    CHECK(error.find("not an ELF file") != std::string::npos);
  }
  SECTION("an executable, not a core") {
    auto [image, error] = open_core("/bin/true");
    CHECK_FALSE(image);
    CHECK(error.find("not a core dump") != std::string::npos);
  }
  SECTION("another architecture") {
    CoreBuilder core;
    core.machine(EM_AARCH64).process(1, "arm").thread(1);
    TempFile file("arm.core");
    auto [image, error] = write_and_open(core, file);
    CHECK_FALSE(image);
    CHECK(error.find("unsupported architecture: heapscope reads x86-64 cores;") != std::string::npos);
    CHECK(error.find("AArch64") != std::string::npos);
  }
  SECTION("no PT_NOTE segment") {
    CoreBuilder core;
    core.process(1, "x").thread(1);
    core.segment(kA, 0x1000);
    auto bytes = core.build();
    const std::uint32_t pt_null = PT_NULL;
    std::memcpy(bytes.data() + sizeof(Elf64_Ehdr), &pt_null, 4);  // the first program header is the note
    TempFile file("no-notes.core");
    write_file(file.path(), bytes);
    auto [image, error] = open_core(file.path());
    CHECK_FALSE(image);
    CHECK(error.find("no PT_NOTE") != std::string::npos);
  }
}

TEST_CASE("ElfCoreImage: corrupt notes give warnings, not crashes or huge allocations", "[coredump]") {
  CoreBuilder core;
  core.process(15, "demo").thread(15);
  core.segment(kA, 0x1000);
  std::vector<std::byte> desc(16 + 24 + 8);
  const std::uint64_t garbage_count = std::uint64_t{1} << 60, page = 4096;
  std::memcpy(desc.data(), &garbage_count, 8);
  std::memcpy(desc.data() + 8, &page, 8);

  SECTION("garbage NT_FILE count") {
    core.raw_note(NT_FILE, "CORE", desc);
    TempFile file("garbage-ntfile.core");
    auto [image, error] = write_and_open(core, file);
    REQUIRE(image);
    CHECK(any_warning_contains(*image, "NT_FILE"));
    CHECK(image->modules().empty());
    CHECK(image->regions().size() == 1);
  }
  SECTION("NT_FILE with fewer paths than entries") {
    std::vector<std::byte> short_names(16 + 2 * 24);
    const std::uint64_t two = 2;
    std::memcpy(short_names.data(), &two, 8);
    std::memcpy(short_names.data() + 8, &page, 8);
    const std::uint64_t entry[3] = {0x7f0000000000, 0x7f0000001000, 0};
    std::memcpy(short_names.data() + 16, entry, sizeof entry);
    std::memcpy(short_names.data() + 40, entry, sizeof entry);
    for (char c : std::string("/only/one\0", 10)) short_names.push_back(static_cast<std::byte>(c));
    core.raw_note(NT_FILE, "CORE", short_names);
    TempFile file("short-ntfile.core");
    auto [image, error] = write_and_open(core, file);
    REQUIRE(image);
    CHECK(any_warning_contains(*image, "only 1 paths"));
    const MemoryRegion* r = image->region_at(0x7f0000000000);
    REQUIRE(r);
    CHECK(r->backing_path == "/only/one");
  }
  SECTION("NT_PRSTATUS of the wrong size") {
    core.raw_note(NT_PRSTATUS, "CORE", std::vector<std::byte>(100));
    TempFile file("bad-prstatus.core");
    auto [image, error] = write_and_open(core, file);
    REQUIRE(image);
    CHECK(image->threads().size() == 1);
    CHECK(any_warning_contains(*image, "100 bytes instead of 336"));
  }
  SECTION("a note whose size runs past the segment") {
    std::vector<std::byte> bogus(8);
    core.raw_note(NT_AUXV, "CORE", bogus);
    auto bytes = core.build();
    CoreLayout layout;
    core.build(&layout);
    // The last note's descsz field: claim 1 GiB.
    const std::uint32_t huge = 1u << 30;
    std::memcpy(bytes.data() + layout.notes_offset + layout.notes_size - 8 - 8 - 12 + 4, &huge, 4);
    TempFile file("bad-note.core");
    write_file(file.path(), bytes);
    auto [image, error] = open_core(file.path());
    REQUIRE(image);
    CHECK(image->threads().size() == 1);
    CHECK(any_warning_contains(*image, "notes are damaged"));
  }
}

TEST_CASE("ElfCoreImage: modules from the dynamic linker's list, with the vdso", "[coredump]") {
  // Executable: ELF header + program headers + dynamic section + r_debug + link_map chain, in memory.
  constexpr Address exe = 0x555555554000;
  constexpr Address vdso = 0x7ffff7fc1000;
  constexpr Address lib = 0x7ffff7d00000;
  const auto lib_bytes = make_elf_module({0x1b, 0x1b}, pattern(0x1000, 10));
  TempFile lib_file("libfake.so");
  write_file(lib_file.path(), lib_bytes);
  const auto vdso_bytes = make_elf_module({0x0d, 0x50}, pattern(0x1000, 11));

  CoreBuilder core;
  core.process(16, "linked").thread(16);
  MemoryBlock& mem = core.segment(exe, 0x3000, 0, PF_R | PF_W);
  Elf64_Ehdr eh{};
  std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_type = ET_DYN;
  eh.e_machine = EM_X86_64;
  eh.e_phoff = 0x40;
  eh.e_phentsize = sizeof(Elf64_Phdr);
  eh.e_phnum = 3;
  mem.put_bytes(exe, &eh, sizeof eh);
  Elf64_Phdr phdrs[3]{};
  phdrs[0].p_type = PT_PHDR;
  phdrs[0].p_vaddr = phdrs[0].p_offset = 0x40;
  phdrs[0].p_filesz = phdrs[0].p_memsz = sizeof phdrs;
  phdrs[1].p_type = PT_LOAD;
  phdrs[1].p_filesz = phdrs[1].p_memsz = 0x3000;
  phdrs[1].p_flags = PF_R | PF_W;
  phdrs[2].p_type = PT_DYNAMIC;
  phdrs[2].p_vaddr = phdrs[2].p_offset = 0x1000;
  phdrs[2].p_filesz = phdrs[2].p_memsz = 32;
  mem.put_bytes(exe + 0x40, phdrs, sizeof phdrs);
  const Address r_debug = exe + 0x2000;
  mem.put_u64(exe + 0x1000, DT_DEBUG);
  mem.put_u64(exe + 0x1008, r_debug);
  mem.put_u32(r_debug, 1);
  mem.put_u64(r_debug + 8, r_debug + 0x100);
  struct Entry {
    Address l_addr;
    const char* name;
    Address l_ld;
  };
  const Entry entries[] = {{exe, "", exe + 0x1000}, {vdso, "linux-vdso.so.1", vdso + 0x800}, {lib, "/lib/libfake.so", lib + 0x1100}};
  for (int i = 0; i < 3; ++i) {
    const Address node = r_debug + 0x100 * (i + 1);
    mem.put_u64(node, entries[i].l_addr);
    mem.put_u64(node + 8, node + 0x80);
    mem.put_u64(node + 16, entries[i].l_ld);
    mem.put_u64(node + 24, i < 2 ? node + 0x100 : 0);
    mem.put_u64(node + 32, i > 0 ? node - 0x100 : 0);
    mem.put_string(node + 0x80, entries[i].name);
  }
  core.file_mapping(exe, exe + 0x3000, 0, "/nonexistent/bin/linked");
  core.segment(vdso, 0x2000, 0, PF_R | PF_X).put_bytes(vdso, vdso_bytes.data(), vdso_bytes.size());
  map_module(core, lib_file.path(), lib, lib_bytes);
  core.auxv(AT_PHDR, exe + 0x40).auxv(AT_PHENT, sizeof(Elf64_Phdr)).auxv(AT_PHNUM, 3);
  core.auxv(AT_ENTRY, exe + 0x500).auxv(AT_SYSINFO_EHDR, vdso);
  TempFile file("linked.core");
  auto [image, error] = write_and_open(core, file);
  REQUIRE(image);
  INFO(all_warnings(*image));

  REQUIRE(image->link_map().size() == 3);
  CHECK(image->link_map()[2].name == "/lib/libfake.so");
  REQUIRE(image->modules().size() == 3);
  const Module* main_exe = image->main_executable();
  REQUIRE(main_exe);
  CHECK(main_exe->path == "/nonexistent/bin/linked");
  CHECK(main_exe->load_bias == exe);
  CHECK(main_exe->file_on_disk.empty());
  CHECK(any_warning_contains(*image, "/nonexistent/bin/linked"));

  const Module* vdso_module = find_module(*image, "[vdso]");
  REQUIRE(vdso_module);
  CHECK(vdso_module->start == vdso);
  CHECK(vdso_module->end == vdso + 0x2000);
  CHECK(vdso_module->load_bias == vdso);
  CHECK(vdso_module->build_id == "0d50");
  CHECK(vdso_module->file_on_disk.empty());

  const Module* lib_module = find_module(*image, lib_file.path());  // NT_FILE's path wins over l_name
  REQUIRE(lib_module);
  CHECK(lib_module->load_bias == lib);
  CHECK(lib_module->file_on_disk == lib_file.path());
  CHECK(lib_module->build_id == "1b1b");
  CHECK(image->modules().size() == 3);
}

// ---- a real core ---------------------------------------------------------------------------------

namespace {

bool command_exists(const std::string& name) {
  return std::system(("command -v " + name + " >/dev/null 2>&1").c_str()) == 0;
}

char process_state(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const auto close_paren = line.rfind(')');
  return close_paren != std::string::npos && close_paren + 2 < line.size() ? line[close_paren + 2] : '?';
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE("ElfCoreImage: a real gcore of /bin/sleep", "[coredump][real]") {
  if (!command_exists("gdb")) {
    WARN("gdb is not installed: the real-core test is skipped");
    return;
  }
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    execl("/bin/sleep", "sleep", "30", static_cast<char*>(nullptr));
    _exit(127);
  }
  // Sleeping in nanosleep means the dynamic linker has finished and libc is loaded.
  for (int i = 0; i < 500 && process_state(child) != 'S'; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));

  TempFile core_file("sleep.core");
  TempFile gdb_log("gdb.log");
  const std::string command = "timeout 120 gdb -batch -nx -p " + std::to_string(child) + " -ex 'gcore " +
                              core_file.path() + "' >" + gdb_log.path() + " 2>&1";
  const int gdb_status = std::system(command.c_str());
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  if (gdb_status != 0 || std::filesystem::file_size(core_file.path()) == 0) {
    WARN("gdb could not capture a core (ptrace not permitted?); the real-core test is skipped. gdb said:\n" +
         read_text(gdb_log.path()));
    return;
  }

  auto [image, error] = open_core(core_file.path());
  INFO(error);
  REQUIRE(image);
  INFO(all_warnings(*image));
  CHECK_FALSE(image->truncated());
  CHECK(image->pid() == child);
  CHECK(image->process_name() == "sleep");
  REQUIRE(image->threads().size() >= 1);
  CHECK(image->threads()[0].tid == static_cast<std::uint32_t>(child));
  CHECK(image->threads()[0].fs_base() != 0);
  CHECK_FALSE(any_warning_contains(*image, "mismatch"));

  auto file_build_id = [](const std::string& path) {
    std::string err;
    auto f = ElfFile::open(path, &err);
    return f ? f->build_id().value_or("") : std::string();
  };

  const Module* exe = image->main_executable();
  REQUIRE(exe);
  CHECK(std::filesystem::path(exe->path).filename() == "sleep");
  CHECK_FALSE(exe->file_on_disk.empty());
  CHECK_FALSE(exe->build_id.empty());
  CHECK(exe->build_id == file_build_id(exe->file_on_disk));

  const Module* libc = find_module(*image, "libc.so.6");
  REQUIRE(libc);
  CHECK_FALSE(libc->file_on_disk.empty());
  CHECK_FALSE(libc->build_id.empty());
  CHECK(libc->build_id == file_build_id(libc->file_on_disk));
  const Module* ld = find_module(*image, "ld-linux");
  REQUIRE(ld);
  CHECK_FALSE(ld->file_on_disk.empty());
  CHECK(ld->build_id == file_build_id(ld->file_on_disk));
  CHECK(find_module(*image, "[vdso]") != nullptr);

  // link_map found the same objects at the same load biases.
  bool link_map_has_libc = false, link_map_has_exe = false;
  for (const LinkMapEntry& e : image->link_map()) {
    if (e.name.find("libc.so.6") != std::string::npos && e.l_addr == libc->load_bias) link_map_has_libc = true;
    if (e.name.empty() && e.l_addr == exe->load_bias) link_map_has_exe = true;
  }
  CHECK(link_map_has_libc);
  CHECK(link_map_has_exe);

  // libc's .text: gdb leaves it out of the core, so these bytes come from the verified file on disk.
  std::string err;
  auto libc_file = ElfFile::open(libc->file_on_disk, &err);
  REQUIRE(libc_file);
  GElf_Shdr text{};
  REQUIRE(gelf_getshdr(libc_file->section(".text"), &text));
  const Address text_addr = libc->load_bias + text.sh_addr + 0x1000;
  auto raw_core = ElfFile::open(core_file.path(), &err);
  REQUIRE(raw_core);
  for (const GElf_Phdr& ph : raw_core->program_headers())
    if (ph.p_type == PT_LOAD) CHECK_FALSE((text_addr >= ph.p_vaddr && text_addr < ph.p_vaddr + ph.p_filesz));
  std::vector<std::byte> from_image(256);
  REQUIRE(image->read(text_addr, from_image.data(), from_image.size()) == from_image.size());
  const auto from_file = libc_file->file_range(text.sh_offset + 0x1000, from_image.size());
  REQUIRE(from_file.size() == from_image.size());
  CHECK(std::memcmp(from_image.data(), from_file.data(), from_image.size()) == 0);
  const MemoryRegion* text_region = image->region_at(text_addr);
  REQUIRE(text_region);
  CHECK(text_region->executable);
  CHECK(text_region->bytes_present);
}
