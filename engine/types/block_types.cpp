#include "types/block_types.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <unordered_map>

#include "base/progress.h"
#include "base/workers.h"
#include "model/block_index.h"
#include "image/memory_cursor.h"
#include "image/word_scan.h"
#include "symbols/cxx_names.h"
#include "types/functor_sources.h"

namespace heapscope {

namespace {

constexpr std::string_view kVtablePrefix = "vtable for ";

struct Manager {
  std::string functor_type;
  const ModuleSymbols* module = nullptr;
  Address value = 0;  // the symbol's (link-time) value
};

// Runtime addresses of std::function manager functions in every module → what they manage.
std::unordered_map<Address, Manager> manager_functions(const Image& image, const SymbolIndex& symbols) {
  std::unordered_map<Address, Manager> out;
  for (const Module& m : image.modules()) {
    const ModuleSymbols* syms = symbols.symbols_for(m);
    if (!syms) continue;
    for (const Symbol& s : syms->symbols()) {
      if (s.kind != SymbolKind::function || s.name.find("_M_manager") == std::string::npos) continue;
      std::string type = functor_type_from_manager(demangle(s.name));
      if (!type.empty()) out.emplace(m.load_bias + s.value, Manager{std::move(type), syms, s.value});
    }
  }
  return out;
}

// Appends " (file.cpp:42)" to the type name of each functor whose definition DWARF gives (a lambda's is
// the lambda expression): one lambda type name may stand for many lambdas of one function.
void name_functor_sources(BlockTypes& types, const std::unordered_map<const Manager*, std::uint32_t>& used) {
  std::map<const ModuleSymbols*, std::vector<std::pair<const Manager*, std::uint32_t>>> by_module;
  for (const auto& [manager, id] : used) by_module[manager->module].push_back({manager, id});
  for (const auto& [module, managers] : by_module) {
    std::vector<Address> values;
    for (const auto& [manager, id] : managers) values.push_back(manager->value);
    const std::map<Address, SourceLocation> sources = functor_sources(*module, values);
    for (const auto& [manager, id] : managers)
      if (auto it = sources.find(manager->value); it != sources.end()) {
        types.rename(id, fmt::format("{} ({})", manager->functor_type, it->second.describe()));
        types.set_source(id, it->second.describe());
      }
  }
}

// The mangled name ("7Request") a type_info holds in its second word, demangled; empty when it does not
// look like one (its own vptr and the name in modules, the name a mangled type).
std::string type_info_class(const Image& image, Address type_info) {
  const auto type_info_vptr = image.read_u64(type_info);
  const auto name_address = image.read_u64(type_info + 8);
  if (!type_info_vptr || !image.module_at(*type_info_vptr) || !name_address || !image.module_at(*name_address))
    return {};
  const std::optional<std::string> name = image.read_c_string(*name_address, 1024);
  if (!name || name->empty() || !std::all_of(name->begin(), name->end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$' || c == '.';
      }))
    return {};
  const std::string described = demangle("_ZTS" + *name);  // "typeinfo name for Request"
  constexpr std::string_view kPrefix = "typeinfo name for ";
  if (described.rfind(kPrefix, 0) != 0) return {};
  return described.substr(kPrefix.size());
}

// The class of an object whose first word `vptr` no symbol names (a stripped binary). A primary vtable
// is preceded by its offset-to-top word (0: the object starts at the block's start) and its type_info
// pointer: the class's RTTI names it. Without RTTI (-fno-rtti) that pointer is 0, and objects can still
// be grouped by their vtable, "class with vtable app+0x1c2340", when it has a vtable's shape: in a
// module's read-only data, its first slot pointing to code. Empty when the checks fail (no vtable).
struct ClassName {
  std::string name;
  Naming naming = Naming::none;
};

ClassName class_of_unnamed_vtable(const Image& image, Address vptr) {
  const auto offset_to_top = image.read_u64(vptr - 16);
  const auto type_info = image.read_u64(vptr - 8);
  if (!offset_to_top || *offset_to_top != 0 || !type_info) return {};
  if (*type_info != 0)
    return image.module_at(*type_info) ? ClassName{type_info_class(image, *type_info), Naming::rtti} : ClassName{};
  const Module* module = image.module_at(vptr);
  const MemoryRegion* region = image.region_at(vptr);
  const auto first_slot = image.read_u64(vptr);
  if (!module || !region || region->writable || !first_slot) return {};
  const MemoryRegion* code = image.region_at(*first_slot);
  if (!code || !code->executable || !image.module_at(*first_slot)) return {};
  return {fmt::format("class with vtable {}+0x{:x}", module->name(), vptr - module->load_bias), Naming::vtable};
}

}  // namespace

std::string class_named_by_rtti(const Image& image, Address vptr) {
  ClassName named = class_of_unnamed_vtable(image, vptr);
  return named.naming == Naming::rtti ? std::move(named.name) : std::string();
}

std::string functor_type_from_manager(const std::string& demangled) {
  const std::size_t at = demangled.find(">::_M_manager(");
  if (at == std::string::npos) return {};
  const std::vector<std::string> args = template_arguments_ending_at(demangled, at + 1);
  if (args.empty()) return {};
  // _Base_manager<F> has one argument; _Function_handler<Sig, F> has the functor last.
  return args.back();
}

void type_coroutine_frames(BlockTypes& types, const CoroutineFrames& coroutines) {
  std::vector<std::uint32_t> ids;
  for (const CoroutineFunction& f : coroutines.functions) ids.push_back(types.intern("coroutine frame " + f.name, Naming::symbol));
  for (const CoroutineFrame& frame : coroutines.frames) types.set(frame.block, ids[frame.function]);
}

std::string BlockTypes::name(std::size_t block, const Block& b) const {
  const std::uint32_t id = type_id(block);
  return id == kUnknown ? fmt::format("unknown ({} bytes)", b.usable_size()) : names_[id];
}

void BlockTypes::mark_from_vtable(std::uint32_t id) {
  if (id >= from_vtable_.size()) from_vtable_.resize(id + 1, false);
  from_vtable_[id] = true;
}

std::uint32_t BlockTypes::first_of_larger(std::uint32_t id) {
  const std::uint32_t larger = intern(names_[id] + " (first of a larger block)", namings_[id]);
  if (larger >= first_of_.size()) first_of_.resize(larger + 1, kUnknown);
  first_of_[larger] = id;
  set_source(larger, sources_[id]);
  return larger;
}

std::uint32_t BlockTypes::intern(const std::string& name, Naming naming) {
  const auto [it, fresh] = id_of_name_.try_emplace(name, static_cast<std::uint32_t>(names_.size()));
  if (!fresh) return it->second;
  names_.push_back(name);
  sources_.emplace_back();
  namings_.push_back(naming);
  return it->second;
}

void BlockTypes::set_source(std::uint32_t id, std::string source) {
  if (id != kUnknown && id < sources_.size()) sources_[id] = std::move(source);
}

void BlockTypes::rename(std::uint32_t id, std::string name) {
  if (id == kUnknown || id >= names_.size()) return;
  // The old name now goes by the next id that has it, if any; the new one by the lowest id that has it.
  if (const auto it = id_of_name_.find(names_[id]); it != id_of_name_.end() && it->second == id) {
    const auto other = std::find(names_.begin() + id + 1, names_.end(), names_[id]);
    if (other == names_.end()) id_of_name_.erase(it);
    else it->second = static_cast<std::uint32_t>(other - names_.begin());
  }
  names_[id] = std::move(name);
  const auto [it, fresh] = id_of_name_.try_emplace(names_[id], id);
  if (!fresh && it->second > id) it->second = id;
}

void BlockTypes::resize(std::size_t blocks) {
  subset_ = false;
  members_ = {};
  ids_.assign(blocks, kUnknown);
}

void BlockTypes::resize_for(std::size_t blocks, std::span<const BlockId> members) {
  subset_ = true;
  BitArray bits(blocks);
  for (const BlockId b : members) bits.set(b);
  members_ = RankedBits(std::move(bits));
  ids_.assign(members_.members(), kUnknown);
}

std::vector<BlockTypes::SavedType> BlockTypes::saved_types() const {
  std::vector<SavedType> out(names_.size());
  for (std::uint32_t id = 0; id < out.size(); ++id)
    out[id] = {names_[id], sources_[id], namings_[id], from_vtable(id), first_object_type(id)};
  return out;
}

BlockTypes BlockTypes::restored(std::vector<SavedType> types, TypeIdArray ids) {
  BlockTypes t;
  t.names_.clear();
  t.sources_.clear();
  t.namings_.clear();
  t.id_of_name_.clear();
  t.from_vtable_.assign(types.size(), false);
  t.first_of_.assign(types.size(), kUnknown);
  for (std::uint32_t id = 0; id < types.size(); ++id) {
    SavedType& type = types[id];
    t.id_of_name_.try_emplace(type.name, id);  // each name's lowest id, as intern and rename keep it
    t.names_.push_back(std::move(type.name));
    t.sources_.push_back(std::move(type.source));
    t.namings_.push_back(type.naming);
    t.from_vtable_[id] = type.from_vtable;
    t.first_of_[id] = type.first_of;
  }
  t.ids_ = std::move(ids);
  return t;
}

std::size_t BlockTypes::typed_blocks() const {
  return ids_.count_not(kUnknown);
}

BlockTypes infer_types(const Image& image, const SymbolIndex& symbols, const HeapModel& heap, const BlockIndex& index,
                       const RootSet& roots, const std::vector<bool>* within, const std::vector<BlockId>* members) {
  auto wanted = [&](std::size_t block) { return !within || (*within)[block]; };
  const bool listed = members != nullptr;
  BlockTypes types;
  if (listed) types.resize_for(heap.blocks.size(), *members);
  else types.resize(heap.blocks.size());

  // Vtables. A vtable is in a module, never in a heap block: most first words are heap pointers or data.
  // The workers find the blocks whose first word could be one; each distinct word is then resolved once.
  // With `members`, the workers take slices of the list rather than of every block's flag.
  const std::size_t items = listed ? members->size() : heap.blocks.size();
  const unsigned n = worker_count(items, 1 << 16);
  std::vector<std::vector<std::pair<BlockId, Address>>> candidates(n);
  progress_total(items);
  run_workers(n, [&](unsigned w) {
    MemoryCursor mem(image);
    constexpr std::size_t kProgressBlocks = 1 << 16;
    const auto [first, last] = slice_of(items, n, w);
    for (std::size_t item = first; item < last; ++item) {
      if ((item - first) % kProgressBlocks == kProgressBlocks - 1) progress_step(kProgressBlocks);  // throws on Ctrl-C
      const std::size_t i = listed ? (*members)[item] : item;
      if (!listed && !wanted(i)) continue;  // first: most blocks are not wanted, and their Block need not be read
      const Block& b = heap.blocks[i];
      if (!is_allocated(b.state) || b.usable_size() < 8) continue;
      const auto word = mem.u64(b.address());
      if (word && *word != 0 && image.module_at(*word) && index.find(*word) == kNoBlock)
        candidates[w].emplace_back(static_cast<BlockId>(i), *word);
    }
  });
  std::unordered_map<Address, std::uint32_t> by_first_word;
  for (const auto& slice : candidates)
    for (const auto& [block, word] : slice) {
      auto [it, fresh] = by_first_word.try_emplace(word, BlockTypes::kUnknown);
      if (fresh) {
        // The `vtable for X` symbol where there is one; the RTTI the vtable points to otherwise.
        const ResolvedSymbol s = symbols.resolve(word);
        ClassName named;
        if (s.symbol && s.symbol->name.rfind("_ZTV", 0) == 0) {
          named = {demangle(s.symbol->name), Naming::symbol};
          if (named.name.rfind(kVtablePrefix, 0) == 0) named.name.erase(0, kVtablePrefix.size());
        } else if (!s.symbol || s.symbol->kind != SymbolKind::function) {
          named = class_of_unnamed_vtable(image, word);
        }
        if (!named.name.empty()) {
          it->second = types.intern(named.name, named.naming);
          types.mark_from_vtable(it->second);
        }
      }
      types.set(block, it->second);
    }

  // std::function keeps its heap-stored functor pointer 16 bytes before its manager pointer.
  const auto managers = manager_functions(image, symbols);
  if (managers.empty()) return types;
  Address lo = ~Address{0}, hi = 0;
  for (const auto& [addr, manager] : managers) {
    lo = std::min(lo, addr);
    hi = std::max(hi, addr);
  }
  std::unordered_map<const Manager*, std::uint32_t> functor_ids;
  auto visit = [&](Address at, std::uint64_t word) {
    if (word < lo || word > hi) return;
    auto m = managers.find(word);
    if (m == managers.end()) return;
    const auto functor = image.read_u64(at - 16);
    if (!functor) return;
    const BlockId target = index.find(*functor);
    if (target == kNoBlock || heap.blocks[target].address() != *functor || !wanted(target)) return;
    auto [it, fresh] = functor_ids.try_emplace(&m->second, 0);
    if (fresh) it->second = types.intern(m->second.functor_type, Naming::symbol);
    types.set(target, it->second);
  };
  // The words next to a pointer into a wanted block lie in a block pointing to it: wanted too.
  auto visit_block = [&](std::size_t i) {
    const Block& b = heap.blocks[i];
    if (is_allocated(b.state)) for_each_word(image, b.address(), b.address() + b.usable_size(), visit);
  };
  if (listed) {
    for (const BlockId b : *members) visit_block(b);
  } else {
    for (std::size_t i = 0; i < heap.blocks.size(); ++i)
      if (wanted(i)) visit_block(i);
  }
  for (const RootRange& r : roots.ranges)
    if (r.kind != RootKind::registers) for_each_word(image, r.start, r.end, visit);
  name_functor_sources(types, functor_ids);
  return types;
}

}  // namespace heapscope
