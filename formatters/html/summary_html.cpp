// HTML view of `summary`: the process, how the heap was found, its arenas and where the bytes are.
#include "formatters/html/html_views.h"
#include "formatters/render.h"
#include "formatters/text/text_util.h"

namespace heapscope {

namespace html {

namespace {

StateTotal total_of(const StateTotals& totals, BlockState s) { return totals[static_cast<int>(s)]; }

void add_process(Page& page, const SummaryReport& r, int level) {
  page.section("Process", level);
  page.append(fmt::format("<p>Target: <code>{}</code><br>Threads: {}; modules: {}</p>\n", escape(r.target),
                          r.threads.size(), r.modules.size()));
  Table threads("summary.threads");
  threads.column("tid", Table::Kind::number).column("name");
  for (const ThreadRow& t : r.threads) threads.row({number_cell(t.tid), text_cell(t.name)});
  page.append(threads.html());
  Table modules("summary.modules");
  modules.column("load bias", Table::Kind::number).column("path").column("symbols").column("DWARF").column("missing")
      .column("build-id");
  for (const ModuleRow& m : r.modules) {
    std::string missing;
    for (const std::string& what : m.missing) missing += (missing.empty() ? "" : ", ") + what;
    if (!m.install_hint.empty()) missing += " (" + m.install_hint + ")";
    modules.row({address_cell(m.load_bias), text_cell(m.path), text_cell(m.symbols), text_cell(m.dwarf_source),
                  text_cell(missing), text_cell(m.build_id)});
  }
  page.append(modules.html());
}

void add_heap_overview(Page& page, const SummaryReport& r, int level) {
  page.section("Heap", level);
  if (!r.heap_error.empty()) {
    page.paragraph("Not walked: " + r.heap_error);
    return;
  }
  page.paragraph(fmt::format("{} malloc {}{}", r.allocator, r.version.empty() ? "(release unknown)" : r.version,
                             r.heap_complete ? "" : " (PARTIAL: see warnings)"));
  std::vector<Bar> bars;
  for (int s = 0; s < kBlockStateCount; ++s) {
    const StateTotal t = r.totals[s];
    bars.push_back({block_state_name(static_cast<BlockState>(s)), static_cast<double>(t.bytes),
                    fmt::format("{} in {}", text::bytes(t.bytes), t.blocks)});
  }
  page.append(bar_chart(bars, "Chunk bytes per block state"));
  if (r.typed)
    page.paragraph(fmt::format("Typed: {:.1f}% of allocated bytes ({} of {}), {} of {} blocks",
                               r.typed->bytes_percent(), text::bytes(r.typed->bytes),
                               text::bytes(r.typed->in_use_bytes), r.typed->blocks, r.typed->in_use_blocks));

  Table found("summary.discovery");
  found.column("structure").column("address", Table::Kind::number).column("found by");
  for (const Discovery& d : r.discovery)
    if (d.structure != "arena")
      found.row({text_cell(d.structure), d.address ? address_cell(d.address) : Cell{}, text_cell(d.method)});
  page.append(found.html());
}

void add_arenas(Page& page, const SummaryReport& r, int level) {
  page.section("Arenas", level);
  Table arenas("summary.arenas");
  arenas.column("arena").column("heaps", Table::Kind::number).column("system", Table::Kind::number);
  // The states the allocator has, by its own names.
  std::vector<BlockState> states;
  for (BlockState s : {BlockState::in_use, BlockState::free, BlockState::tcache, BlockState::fastbin, BlockState::top})
    if (!r.state_labels[static_cast<int>(s)].empty()) states.push_back(s);
  for (BlockState s : states) arenas.column(r.state_labels[static_cast<int>(s)] + " bytes", Table::Kind::number);
  arenas.column("in use blocks", Table::Kind::number).column("complete");
  for (const ArenaInfo& a : r.arenas) {
    std::vector<Cell> row{html_cell((a.is_main ? "main " : "") + escape(text::hex(a.address)), std::to_string(a.address)),
                          number_cell(a.heaps.size()), bytes_cell(a.system_bytes)};
    for (BlockState s : states) row.push_back(bytes_cell(total_of(a.totals, s).bytes));
    row.push_back(number_cell(total_of(a.totals, BlockState::in_use).blocks));
    row.push_back(text_cell(a.complete ? "yes" : "PARTIAL"));
    arenas.row(std::move(row));
  }
  page.append(arenas.html());
  if (!r.state_labels[static_cast<int>(BlockState::mmapped)].empty())
    page.paragraph(fmt::format("mmapped chunks: {} in {} blocks", text::bytes(r.mmapped.bytes), r.mmapped.blocks));
  if (r.figures.empty()) return;
  // The allocator's own counters beside the walk's counts of the same.
  Table figures("summary.figures");
  figures.column("figure").column("its count", Table::Kind::number).column("the walk's", Table::Kind::number)
      .column("what");
  auto count = [](const std::optional<std::uint64_t>& v) { return v ? number_cell(*v) : text_cell("-"); };
  for (const AllocatorFigure& f : r.figures)
    figures.row({text_cell(f.name), count(f.own), count(f.walk),
                 text_cell(f.meaning + (f.own && f.walk && *f.own != *f.walk ? " (DIFFERENT)" : ""))});
  page.append(figures.html());
}

}  // namespace

// The heap first; the long per-thread and per-module tables last.
// Writable anonymous memory no allocator walk accounts for, with its largest mappings.
void add_outside_malloc(Page& page, const OutsideMalloc& o, int level) {
  page.section("Memory outside malloc", level);
  page.paragraph(fmt::format("{} in {} anonymous mapping{} that no allocator walk accounts for: not a heap, not an "
                             "mmapped chunk, not a thread's stack (another allocator's arenas, a pool, data mmap'ed "
                             "by hand).",
                             text::bytes(o.bytes), o.mappings, o.mappings == 1 ? "" : "s"));
  Table largest("summary.outside_malloc");
  largest.column("mapping").column("end").column("mapping bytes", Table::Kind::number)
      .column("outside malloc", Table::Kind::number);
  for (const AnonymousMapping& m : o.largest)
    largest.row({address_cell(m.start), address_cell(m.end), bytes_cell(m.end - m.start), bytes_cell(m.outside_bytes)});
  page.append(largest.html());
}

void add_summary(Page& page, const SummaryReport& r, int level) {
  add_heap_overview(page, r, level);
  if (r.heap_error.empty()) add_arenas(page, r, level);
  if (r.outside_malloc && r.outside_malloc->bytes) add_outside_malloc(page, *r.outside_malloc, level);
  add_process(page, r, level);
  page.warnings(r.warnings);
}

}  // namespace html

std::string render_html(const SummaryReport& r) {
  html::Page page("heapscope summary: " + r.target);
  html::add_summary(page, r, 2);
  return page.html();
}

}  // namespace heapscope
