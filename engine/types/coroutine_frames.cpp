#include "types/coroutine_frames.h"

#include <dwarf.h>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <unordered_map>

#include "image/memory_cursor.h"
#include "image/word_scan.h"

namespace heapscope {

namespace {

constexpr std::string_view kGccFrame = ".Frame";

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// A Clang clone "<ramp>.<suffix>" of a C++ function: the ramp's mangled name, or empty.
std::string clang_coroutine_ramp(std::string_view mangled, std::string_view clone_suffix) {
  if (!ends_with(mangled, clone_suffix) || mangled.rfind("_Z", 0) != 0) return {};
  const std::string_view ramp = mangled.substr(0, mangled.size() - clone_suffix.size());
  if (ramp.find('.') != std::string_view::npos) return {};  // another clone's clone (".Frame.destroy", ...)
  return std::string(ramp);
}

// One module's coroutines by ramp name, as its clone symbols show them.
using FunctionsByRamp = std::map<std::string, CoroutineFunction>;

void add_clone(FunctionsByRamp& out, const std::string& ramp, CoroutineFunction::Compiler compiler, bool is_destroy,
               Address address, const Module& module) {
  CoroutineFunction& f = out[ramp];
  f.ramp = ramp;
  f.name = demangle(ramp);
  f.module = std::string(module.name());
  f.compiler = compiler;
  (is_destroy ? f.destroy : f.resume) = address;
}

FunctionsByRamp coroutine_clones(const Module& module, const ModuleSymbols& syms) {
  using Compiler = CoroutineFunction::Compiler;
  FunctionsByRamp out;
  for (const Symbol& s : syms.symbols()) {
    if (s.kind != SymbolKind::function) continue;
    const Address at = module.load_bias + s.value;
    struct Clone {
      std::string ramp;
      Compiler compiler;
      bool is_destroy;
    };
    for (const Clone& c : {Clone{gcc_coroutine_ramp(s.name, ".destroy"), Compiler::gcc, true},
                           Clone{gcc_coroutine_ramp(s.name, ".actor"), Compiler::gcc, false},
                           Clone{clang_coroutine_ramp(s.name, ".destroy"), Compiler::clang, true},
                           Clone{clang_coroutine_ramp(s.name, ".resume"), Compiler::clang, false}})
      if (!c.ramp.empty()) {
        add_clone(out, c.ramp, c.compiler, c.is_destroy, at, module);
        break;
      }
  }
  std::erase_if(out, [](const auto& entry) { return entry.second.destroy == 0; });
  return out;
}

bool is_gcc_awaiter(const std::string& member) {
  // Is_<scope>_<n>, Fs_<scope>_<n>, Aw<k>_<scope>_<n>
  if (member.rfind("Is_", 0) == 0 || member.rfind("Fs_", 0) == 0) return true;
  return member.size() > 3 && member.rfind("Aw", 0) == 0 && std::isdigit(static_cast<unsigned char>(member[2]));
}

CoroutineLayout layout_of(Dwarf_Die& frame_type) {
  CoroutineLayout layout;
  layout.frame_size = type_size(frame_type);
  for (DwarfMember& m : data_members(frame_type)) {
    if (m.name == "_Coro_promise" || m.name == "__promise") layout.promise = m;
    else if (m.name == "_Coro_resume_index" || m.name == "__coro_index") layout.index = m;
    else if (is_gcc_awaiter(m.name)) layout.awaiters.push_back(std::move(m));
  }
  return layout;
}

// The type a pointer type points to, or the type itself.
std::optional<Dwarf_Die> pointee_or_self(std::optional<Dwarf_Die> type) {
  if (type && dwarf_tag(&*type) == DW_TAG_pointer_type) return die_type(*type);
  return type;
}

// Frame layouts and definitions of the module's coroutines, from its DWARF.
void read_dwarf(const ModuleSymbols& syms, FunctionsByRamp& functions, std::vector<std::string>& warnings) {
  std::string error;
  const auto dwarf = DwarfFile::open(syms.dwarf_file(), &error);
  if (!dwarf) {
    warnings.push_back(fmt::format("coroutine frames of {} are recognised without DWARF ({})", syms.path(), error));
    return;
  }
  auto function_for = [&](const std::string& ramp) -> CoroutineFunction* {
    auto it = functions.find(ramp);
    return it == functions.end() ? nullptr : &it->second;
  };
  dwarf->for_each_die([&](Dwarf_Die& die, Dwarf_Die* parent) {
    const int tag = dwarf_tag(&die);
    if (tag == DW_TAG_subprogram) {
      CoroutineFunction* f = function_for(die_linkage_name(die));
      if (f && !f->source.known()) f->source = declaration_of(die);
      return true;
    }
    if (tag == DW_TAG_variable && parent && dwarf_tag(parent) == DW_TAG_subprogram) {
      // Clang: the ramp's variable __coro_frame has the frame type (the type itself may sit elsewhere).
      CoroutineFunction* f = die_name(die) == "__coro_frame" ? function_for(die_linkage_name(*parent)) : nullptr;
      std::optional<Dwarf_Die> type = f ? pointee_or_self(die_type(die)) : std::nullopt;
      if (type && die_name(*type) == "__coro_frame_ty" && !f->layout) f->layout = layout_of(*type);
      return false;
    }
    if (tag != DW_TAG_structure_type) return true;
    const std::string name = die_name(die);
    if (!ends_with(name, kGccFrame)) return false;  // a structure's children are its members
    // GCC: "<ramp>.Frame"; its members are declared at the coroutine's first line.
    CoroutineFunction* f = function_for(name.substr(0, name.size() - kGccFrame.size()));
    if (!f || f->layout) return false;
    f->layout = layout_of(die);
    Dwarf_Die child;
    if (dwarf_child(&die, &child) == 0) do {
        if (dwarf_tag(&child) == DW_TAG_member && !f->source.known()) f->source = declaration_of(child);
      } while (dwarf_siblingof(&child, &child) == 0);
    return false;
  });
  for (const auto& [ramp, f] : functions)
    if (!f.layout)
      warnings.push_back(fmt::format("no DWARF describes the frame of coroutine {}: its suspend points and awaiters "
                                     "are unknown", f.name));
}

// A little-endian unsigned integer of 1 to 8 bytes.
std::optional<std::uint64_t> read_unsigned(const Image& image, Address at, std::uint64_t size) {
  unsigned char bytes[8] = {};
  if (size == 0 || size > 8 || image.read(at, bytes, size) != size) return std::nullopt;
  std::uint64_t value = 0;
  for (std::uint64_t i = size; i-- > 0;) value = value << 8 | bytes[i];
  return value;
}

// Links each frame to the frame whose start its promise holds (its continuation: the awaiter).
void link_awaiters(const Image& image, CoroutineFrames& out) {
  std::unordered_map<Address, std::uint32_t> by_address;
  for (std::uint32_t i = 0; i < out.frames.size(); ++i) by_address.emplace(out.frames[i].address, i);
  for (std::uint32_t i = 0; i < out.frames.size(); ++i) {
    CoroutineFrame& frame = out.frames[i];
    const CoroutineFunction& f = out.functions[frame.function];
    if (!f.layout || !f.layout->promise || f.layout->promise->size == 0) continue;
    const Address start = frame.address + f.layout->promise->offset;
    for_each_word(image, start, start + f.layout->promise->size, [&](Address, std::uint64_t word) {
      if (frame.awaiter != CoroutineFrame::kNone) return;
      const auto it = by_address.find(word);
      if (it != by_address.end() && it->second != i) frame.awaiter = it->second;
    });
  }
}

}  // namespace

std::string gcc_coroutine_ramp(const std::string& mangled, std::string_view clone_suffix) {
  if (!ends_with(mangled, clone_suffix)) return {};
  const std::string_view type = std::string_view(mangled).substr(0, mangled.size() - clone_suffix.size());
  if (!ends_with(type, kGccFrame)) return {};
  // The frame type is the last <source-name> of the clone's parameter: "<length><ramp>.Frame".
  for (std::size_t length = kGccFrame.size() + 3; length < type.size(); ++length) {
    const std::size_t start = type.size() - length;
    std::size_t digits = start;
    while (digits > 0 && std::isdigit(static_cast<unsigned char>(type[digits - 1]))) --digits;
    if (digits == start) continue;
    if (std::stoull(std::string(type.substr(digits, start - digits))) != length) continue;
    const std::string_view name = type.substr(start, length - kGccFrame.size());
    if (name.rfind("_Z", 0) == 0) return std::string(name);
  }
  return {};
}

std::string CoroutineFrames::suspend_point(const CoroutineFrame& frame) const {
  if (frame.final_suspend) return "final suspend";
  const CoroutineFunction& f = functions[frame.function];
  if (!frame.suspend_index) return "suspended";
  const std::uint64_t index = *frame.suspend_index;
  if (f.compiler == CoroutineFunction::Compiler::clang)
    return index == 0 ? "initial suspend" : fmt::format("suspend point {}", index);
  // GCC numbers its suspend points 2, 4, 6, ... in the order of the awaiter members; odd values are the
  // destroy paths of the same points.
  const std::uint64_t point = index / 2;
  if (point == 0 || !f.layout || point > f.layout->awaiters.size()) return fmt::format("suspend point {}", index);
  const DwarfMember& awaiter = f.layout->awaiters[point - 1];
  if (awaiter.name.rfind("Is_", 0) == 0) return "initial suspend";
  if (awaiter.name.rfind("Fs_", 0) == 0) return "final suspend";
  const std::size_t number = std::stoul(awaiter.name.substr(2, awaiter.name.find('_') - 2));
  return awaiter.type.empty() ? fmt::format("co_await #{}", number + 1)
                              : fmt::format("co_await #{} ({})", number + 1, awaiter.type);
}

CoroutineFrames find_coroutine_frames(const Image& image, const SymbolIndex& symbols, const HeapModel& heap) {
  CoroutineFrames out;
  std::unordered_map<Address, std::uint32_t> by_destroy;
  for (const Module& m : image.modules()) {
    const ModuleSymbols* syms = m.file_on_disk.empty() ? nullptr : symbols.symbols_for(m);
    if (!syms) continue;
    FunctionsByRamp functions = coroutine_clones(m, *syms);
    if (functions.empty()) continue;
    read_dwarf(*syms, functions, out.warnings);
    for (auto& [ramp, f] : functions) {
      by_destroy.emplace(f.destroy, static_cast<std::uint32_t>(out.functions.size()));
      out.functions.push_back(std::move(f));
    }
  }
  if (by_destroy.empty()) return out;

  MemoryCursor mem(image);
  for (BlockId b = 0; b < heap.blocks.size(); ++b) {
    const Block& block = heap.blocks[b];
    if (!is_allocated(block.state) || block.usable_size() < 16) continue;
    const auto destroy = mem.u64(block.address() + 8);
    const auto found = destroy ? by_destroy.find(*destroy) : by_destroy.end();
    if (found == by_destroy.end()) continue;
    const CoroutineFunction& f = out.functions[found->second];
    const auto resume = mem.u64(block.address());
    if (!resume || (*resume != 0 && *resume != f.resume)) continue;
    CoroutineFrame frame;
    frame.block = b;
    frame.address = block.address();
    frame.function = found->second;
    frame.final_suspend = *resume == 0;
    if (f.layout && f.layout->index && f.layout->index->offset + f.layout->index->size <= block.usable_size())
      frame.suspend_index = read_unsigned(image, block.address() + f.layout->index->offset, f.layout->index->size);
    out.frames.push_back(frame);
  }
  link_awaiters(image, out);
  return out;
}

}  // namespace heapscope
