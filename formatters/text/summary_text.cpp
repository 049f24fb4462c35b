#include <algorithm>
#include <string_view>

#include "formatters/render.h"
#include "formatters/text/text_util.h"

namespace heapscope {

namespace {

std::string state_cell(const StateTotal& t) { return fmt::format("{} / {}", t.blocks, text::bytes(t.bytes)); }

// "  0x7f…  /usr/lib/…/libc.so.6  [symbols: build-id, DWARF: build-id]", the file and the debug file in
// use when they are not the obvious ones, then (with `missing`) what is missing and what would install it.
void append_module(std::string& out, const ModuleRow& m, bool missing_too) {
  const std::string indent(21, ' ');
  if (m.file_origin == "none") {
    out += fmt::format("  {:<18} {}  [no file]\n", text::hex(m.load_bias), m.path);
  } else {
    out += fmt::format("  {:<18} {}  [symbols: {}, DWARF: {}]\n", text::hex(m.load_bias), m.path, m.symtab_source,
                       m.dwarf_source);
    if (m.file_origin != "path") out += fmt::format("{}file ({}): {}\n", indent, m.file_origin, m.file);
    if (!m.debug_file.empty()) out += fmt::format("{}debug file: {}\n", indent, m.debug_file);
  }
  if (m.missing.empty() || !missing_too) return;
  std::string missing;
  for (const std::string& what : m.missing) missing += (missing.empty() ? "" : ", ") + what;
  out += fmt::format("{}missing: {}{}\n", indent, missing, m.install_hint.empty() ? "" : " — " + m.install_hint);
}

// One command for the debug packages of every module that lacks its DWARF (a program on a machine without
// them lacks a hundred): after the module list, where -v lists them module by module instead.
void append_install_line(std::string& out, const SummaryReport& r) {
  std::vector<std::string> packages;
  std::size_t lacking = 0;
  for (const ModuleRow& m : r.modules) {
    if (m.missing.empty()) continue;
    ++lacking;
    constexpr std::string_view kApt = "apt install ";
    if (!m.install_hint.starts_with(kApt)) continue;
    const std::string package = m.install_hint.substr(kApt.size());
    if (std::find(packages.begin(), packages.end(), package) == packages.end()) packages.push_back(package);
  }
  if (lacking == 0) return;
  std::string command;
  for (const std::string& p : packages) command += " " + p;
  out += fmt::format("Debug info missing for {} module{}{} (summary -v: module by module).\n", lacking,
                     lacking == 1 ? "" : "s", packages.empty() ? "" : fmt::format(": apt install{}", command));
}

// What modules without symbols or debug info cost, and how to get them, after the module list.
void append_without_debug_info(std::string& out, const SummaryReport& r) {
  std::string names;
  for (const ModuleRow& m : r.modules) {
    if (m.symbols != "dynsym only" && m.symbols != "no file") continue;
    const auto slash = m.path.rfind('/');
    names += (names.empty() ? "" : ", ") + (slash == std::string::npos ? m.path : m.path.substr(slash + 1));
  }
  if (names.empty()) return;
  out += fmt::format(
      "Without debug info: {}. Their frames show as module+offset (app+0x12e7a2, for addr2line -e FILE), "
      "their globals as module+offset, and their heap blocks are typed only by C++ vtables. For names, types and "
      "source lines, install their debug files (Debian: the -dbgsym or -dbg packages, or debuginfod) or give "
      "--debug-dir DIR; for a module with no file, give the right file (--exe for the program; --sysroot DIR for a "
      "core from a container or another machine: the unpacked image, or /proc/PID/root of a process still running "
      "in the container).\n",
      names);
}

void append_process(std::string& out, const SummaryReport& r) {
  out += fmt::format("Target:   {}\n", r.target);
  std::string tids;
  for (std::size_t i = 0; i < r.threads.size() && i < 16; ++i) tids += (i ? ", " : "") + std::to_string(r.threads[i].tid);
  if (r.threads.size() > 16) tids += ", ...";
  out += fmt::format("Threads:  {} (tid {})\n", r.threads.size(), tids);
  out += fmt::format("Modules:  {}\n", r.modules.size());
  for (const ModuleRow& m : r.modules) append_module(out, m, r.every_module_missing);
  if (!r.every_module_missing) append_install_line(out, r);
  append_without_debug_info(out, r);
}

void append_heap(std::string& out, const SummaryReport& r) {
  if (!r.heap_error.empty()) {
    out += fmt::format("\nHeap:     not walked: {}\n", r.heap_error);
    return;
  }
  out += fmt::format("\nHeap:     {} {}{}\n", r.allocator == "glibc" ? "glibc malloc" : r.allocator,
                     r.version.empty() ? "(release unknown)" : r.version,
                     r.heap_complete ? "" : "  (PARTIAL: see warnings)");
  out += "Found by:\n";
  for (const Discovery& d : r.discovery)
    if (d.structure != "arena") out += fmt::format("  {:<15} {:<18} {}\n", d.structure, d.address ? text::hex(d.address) : "", d.method);
  // Columns for the states the allocator has, headed by its own names; mmapped blocks get a line of their
  // own, top chunks a byte count.
  const StateLabels& label = r.state_labels;
  auto has = [&](BlockState s) { return !label[static_cast<int>(s)].empty(); };
  constexpr BlockState kColumns[] = {BlockState::in_use, BlockState::free, BlockState::tcache, BlockState::fastbin};
  const std::string arena = capitalized(r.terms.arena);
  const std::size_t heaps_width = std::max<std::size_t>(5, r.terms.heaps.size());
  std::string heading = fmt::format("\n{:<22} {:>{}} {:>10} ", arena, r.terms.heaps, heaps_width, "system");
  for (BlockState s : kColumns)
    if (has(s)) heading += fmt::format(" {:<20}", label[static_cast<int>(s)]);
  if (has(BlockState::top)) heading += " " + label[static_cast<int>(BlockState::top)];
  out += heading + "\n";
  for (const ArenaInfo& a : r.arenas) {
    std::string row = fmt::format("{:<22} {:>{}} {:>10} ", (a.is_main ? "main " : "") + text::hex(a.address),
                                  a.heaps.size(), heaps_width, text::bytes(a.system_bytes));
    for (BlockState s : kColumns)
      if (has(s)) row += fmt::format(" {:<20}", state_cell(a.totals[static_cast<int>(s)]));
    if (has(BlockState::top)) row += " " + text::bytes(a.totals[static_cast<int>(BlockState::top)].bytes);
    out += row + (a.complete ? "" : "  PARTIAL") + "\n";
  }
  if (has(BlockState::mmapped))
    out += fmt::format("{:<22} {:>5} {:>10}  {}\n", "mmapped chunks", "", text::bytes(r.mmapped.bytes),
                       state_cell(r.mmapped));
  const auto& t = r.totals;
  auto total = [&](BlockState s) { return t[static_cast<int>(s)]; };
  const StateTotal in_use{total(BlockState::in_use).blocks + total(BlockState::mmapped).blocks,
                          total(BlockState::in_use).bytes + total(BlockState::mmapped).bytes};
  const StateTotal free{total(BlockState::free).blocks + total(BlockState::tcache).blocks + total(BlockState::fastbin).blocks,
                        total(BlockState::free).bytes + total(BlockState::tcache).bytes + total(BlockState::fastbin).bytes};
  out += fmt::format("\nIn use:   {} blocks, {} ({} bytes{})\n", in_use.blocks, text::bytes(in_use.bytes),
                     has(BlockState::top) ? "chunk" : "block", has(BlockState::mmapped) ? ", mmapped included" : "");
  // glibc's free states are "bins, tcache, fastbins"; another allocator's by its own names.
  std::string kinds;
  for (BlockState s : {BlockState::free, BlockState::tcache, BlockState::fastbin}) {
    if (!has(s)) continue;
    const std::string& name = label[static_cast<int>(s)];
    kinds += fmt::format("{}{} {}", kinds.empty() ? "" : ", ", state_heading(name),
                         total(s).blocks);
  }
  out += fmt::format("Free:     {} blocks, {} ({})", free.blocks, text::bytes(free.bytes), kinds);
  if (has(BlockState::top)) out += fmt::format(", plus {} in top chunks", text::bytes(total(BlockState::top).bytes));
  out += "\n";
  if (r.reserved.blocks)
    out += fmt::format("Reserved: {} in {} range{} of address space {} keeps without memory (not resident, no blocks)\n",
                       text::bytes(r.reserved.bytes), r.reserved.blocks, r.reserved.blocks == 1 ? "" : "s", r.allocator);
  if (!r.figures.empty()) {
    out += fmt::format("\n{:<36} {:>14} {:>14}  {}\n", "Allocator's own figures", "its count", "the walk's", "what");
    auto cell = [](const std::optional<std::uint64_t>& v) { return v ? fmt::format("{}", *v) : std::string("-"); };
    for (const AllocatorFigure& f : r.figures)
      out += fmt::format("{:<36} {:>14} {:>14}  {}{}\n", f.name, cell(f.own), cell(f.walk), f.meaning,
                         f.own && f.walk && *f.own != *f.walk ? "  (DIFFERENT)" : "");
  }
  if (r.typed)
    out += fmt::format("Typed:    {:.1f}% of allocated bytes ({} of {}), {} of {} blocks\n", r.typed->bytes_percent(),
                       text::bytes(r.typed->bytes), text::bytes(r.typed->in_use_bytes), r.typed->blocks,
                       r.typed->in_use_blocks);
  if (r.typed && !r.typed->by_naming.empty())
    out += fmt::format("Named by: {}\n", text::naming_shares(r.typed->by_naming, r.typed->in_use_bytes));
  if (!r.typed) out += "Named:    not counted (summary --names names every block and counts them by evidence)\n";
  if (r.sites) out += fmt::format("Sites:    {}\n", r.sites->summary);
  if (r.outside_malloc && r.outside_malloc->bytes) {
    const OutsideMalloc& o = *r.outside_malloc;
    const AnonymousMapping& big = o.largest.front();
    out += fmt::format("Outside malloc: {} in {} anonymous mapping{} no allocator walk accounts for (another "
                       "allocator's arenas, a pool, data mmap'ed by hand); the most, {} of the {} mapping {}-{}\n",
                       text::bytes(o.bytes), o.mappings, o.mappings == 1 ? "" : "s", text::bytes(big.outside_bytes),
                       text::bytes(big.end - big.start), text::hex(big.start), text::hex(big.end));
  }
}

}  // namespace

std::string render_text(const SummaryReport& r) {
  std::string out;
  append_process(out, r);
  append_heap(out, r);
  text::append_warnings(out, r.warnings);
  return out;
}

}  // namespace heapscope
