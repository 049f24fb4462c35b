// heapscope-naming-precision: how often the namers that work without a root (those that name leaked
// blocks) disagree with DWARF. On a core whose reachable blocks DWARF types from the roots, it hides that
// typing — each reachable DWARF-typed block starts out as what the vtable/RTTI pass alone gives it — runs
// the namers of unrooted blocks (types/leak_naming.h) over those blocks, and counts per namer the blocks it
// named and those whose name disagrees with DWARF's; and, for every object a vtable's symbol names, whether
// its RTTI alone (what a stripped binary has) names the same class. Not installed; scripts/bench --naming-precision runs it,
// and docs/performance.md has its figures.
//
//   heapscope-naming-precision CORE [--exe EXE] [--no-debug-files] ... [--examples N]
#include <CLI/CLI.hpp>

#include <fmt/format.h>

#include <array>
#include <iostream>
#include <map>
#include <string>

#include "frontends/common/target_options.h"
#include "session/session.h"
#include "sources/elf_core_image.h"
#include "types/block_types.h"
#include "types/leak_naming.h"

namespace {

using namespace heapscope;

bool ends_with(const std::string& s, std::string_view tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}
bool starts_with(const std::string& s, std::string_view head) { return s.rfind(head, 0) == 0; }

// Whether `name`, given by evidence `naming`, says what DWARF's `truth` says. A shape or a content name
// is a kind, not a type: it agrees with the DWARF types of that kind. Strict where in doubt (a vector
// with one element, which DWARF names as the element, counts as a disagreement).
bool agrees(Naming naming, std::string name, const std::string& truth) {
  if (naming == Naming::inferred && ends_with(name, kInferredMark)) name.resize(name.size() - kInferredMark.size());
  if (naming != Naming::pattern && naming != Naming::content) return name == truth;
  if (name == "std::string body") return truth == "char[]";
  if (name == "std::vector body" || name == "std::deque chunk") return ends_with(truth, "[]");
  if (name == "std::list node") return starts_with(truth, "std::_List_node<");
  if (name == "std::map/set node") return starts_with(truth, "std::_Rb_tree_node<");
  if (name == "std::unordered_map/set node") return starts_with(truth, "std::__detail::_Hash_node<");
  if (name == "std::unordered_map/set buckets") return truth == "std::__detail::_Hash_node_base*[]";
  if (name == "std::deque map" || name == "pointer array") return ends_with(truth, "*[]") || ends_with(truth, "*");
  if (name == "C string") return truth.find("char") != std::string::npos;
  if (name == "all zeros") return true;  // what the bytes are, whatever the type
  return false;
}

struct Tally {
  std::uint64_t named = 0, disagree = 0;
  std::vector<std::string> examples;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"How often heapscope's namers of unrooted blocks disagree with DWARF, on reachable blocks"};
  std::string core;
  std::size_t examples = 5;
  TargetOptions target;
  app.add_option("CORE", core, "A core whose program has DWARF for the types of its reachable blocks")->required();
  app.add_option("--examples", examples, "Disagreements shown per namer");
  add_target_options(app, target);
  CLI11_PARSE(app, argc, argv);

  std::string error;
  std::shared_ptr<ElfCoreImage> image = ElfCoreImage::open(core, core_open_options(target), &error);
  if (!image) {
    std::cerr << "heapscope-naming-precision: " << error << "\n";
    return 1;
  }
  try {
    Session s(image, session_options(target));
    const BlockNames& truth = s.names();
    const HeapModel& heap = s.heap();
    const LeakVerdicts& verdicts = s.verdicts();
    // The blocks DWARF types from the roots: the measure.
    std::vector<BlockId> measured;
    for (BlockId b = 0; b < heap.blocks.size(); ++b)
      if (verdicts.verdict[b] == Verdict::reachable && truth.types.naming(b) == Naming::dwarf) measured.push_back(b);
    // What the vtable/RTTI pass alone names, then the namers of unrooted blocks over the measured blocks.
    BlockTypes hidden = infer_types(s.image(), s.symbols(), heap, s.block_index(), s.roots());
    type_coroutine_frames(hidden, s.coroutines());
    DwarfTypes dwarf(s.image(), s.symbols());
    name_unrooted_blocks(s.image(), heap, s.block_index(), measured, hidden, dwarf);

    std::map<Naming, Tally> by_naming;
    for (const BlockId b : measured) {
      const Naming n = hidden.naming(b);
      Tally& t = by_naming[n];
      ++t.named;
      if (n == Naming::none) continue;
      const std::string name = hidden.name(b, heap.blocks[b]);
      const std::string& dwarf_name = truth.types.name_of(truth.types.type_id(b));
      if (agrees(n, name, dwarf_name)) continue;
      ++t.disagree;
      if (t.examples.size() < examples)
        t.examples.push_back(fmt::format("0x{:x}: {} (DWARF: {})", heap.blocks[b].address(), name, dwarf_name));
    }
    // RTTI against the vtable's symbol: every object a vtable symbol names, named again by its RTTI alone.
    Tally rtti;
    for (BlockId b = 0; b < heap.blocks.size(); ++b) {
      const std::uint32_t id = truth.types.type_id(b);
      if (!is_allocated(heap.blocks[b].state) || truth.types.naming_of(id) != Naming::symbol ||
          !truth.types.from_vtable(id))
        continue;
      const auto vptr = s.image().read_u64(heap.blocks[b].address());
      const std::string by_rtti = vptr ? class_named_by_rtti(s.image(), *vptr) : std::string();
      if (by_rtti.empty()) continue;  // no RTTI (-fno-rtti): the vtable namer's "class with vtable" instead
      ++rtti.named;
      if (by_rtti == truth.types.name_of(id)) continue;
      ++rtti.disagree;
      if (rtti.examples.size() < examples)
        rtti.examples.push_back(fmt::format("0x{:x}: {} (symbol: {})", heap.blocks[b].address(), by_rtti,
                                            truth.types.name_of(id)));
    }
    fmt::print("{} reachable blocks typed by DWARF from the roots\n", measured.size());
    fmt::print("{:<10} {:>10} {:>12} {:>8}\n", "namer", "named", "disagreeing", "share");
    for (const auto& [naming, t] : by_naming) {
      if (naming == Naming::none) {
        fmt::print("{:<10} {:>10}\n", "(none)", t.named);
        continue;
      }
      fmt::print("{:<10} {:>10} {:>12} {:>7.2f}%\n", naming_name(naming), t.named, t.disagree,
                 t.named ? 100.0 * static_cast<double>(t.disagree) / static_cast<double>(t.named) : 0.0);
      for (const std::string& e : t.examples) fmt::print("    {}\n", e);
    }
    fmt::print("{:<10} {:>10} {:>12} {:>7.2f}%   (objects a vtable symbol names, named by their RTTI alone)\n",
               "rtti", rtti.named, rtti.disagree,
               rtti.named ? 100.0 * static_cast<double>(rtti.disagree) / static_cast<double>(rtti.named) : 0.0);
    for (const std::string& e : rtti.examples) fmt::print("    {}\n", e);
  } catch (const std::exception& e) {
    std::cerr << "heapscope-naming-precision: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
