#include "types/dwarf_typing.h"

#include <fmt/format.h>

#include <unordered_map>

#include "image/memory_cursor.h"
#include "runtime/static_tls.h"
#include "symbols/cxx_names.h"

namespace heapscope {

namespace {

constexpr int kMaxNesting = 32;                         // structures within structures within a variable
constexpr std::uint64_t kMaxElements = 1u << 24;        // elements of one array followed
constexpr std::string_view kRbTree = "std::_Rb_tree<";
constexpr std::string_view kListBase = "std::__cxx11::_List_base<";
constexpr std::string_view kHashtable = "std::_Hashtable<";

bool starts_with(const std::string& s, std::string_view prefix) { return s.rfind(prefix, 0) == 0; }

std::string trimmed(std::string s) {
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

// The template's argument `n`, as DWARF spells it; empty when there is no such argument.
std::string template_argument(const std::string& name, std::size_t n) {
  const std::vector<std::string> args = template_arguments_ending_at(name, name.size());
  return n < args.size() ? trimmed(args[n]) : std::string();
}

// A node type by name, spelled with or without the space GCC puts between two closing brackets.
DwarfTypeId find_template(const DwarfTypeIndex& ix, const std::string& head, const std::string& args) {
  const DwarfTypeId id = ix.find_structure(head + args + ">");
  return id != kNoDwarfType ? id : ix.find_structure(head + args + " >");
}

// The full node type of a libstdc++ node-based container, when `container` is one (or is such a node).
DwarfTypeId node_type_of(const DwarfTypeIndex& ix, DwarfTypeId container) {
  const std::string& name = ix.type(container).name;
  if (starts_with(name, "std::_Rb_tree_node<") || starts_with(name, "std::_List_node<") ||
      starts_with(name, "std::__detail::_Hash_node<"))
    return container;
  if (starts_with(name, kRbTree)) return find_template(ix, "std::_Rb_tree_node<", template_argument(name, 1));
  if (starts_with(name, kListBase)) return find_template(ix, "std::_List_node<", template_argument(name, 0));
  if (starts_with(name, kHashtable)) {
    const std::string value = template_argument(name, 1);
    const DwarfTypeId cached = ix.find_structure("std::__detail::_Hash_node<" + value + ", true>");
    return cached != kNoDwarfType ? cached : ix.find_structure("std::__detail::_Hash_node<" + value + ", false>");
  }
  return kNoDwarfType;
}

}  // namespace

DwarfTypeId stored_value_type(const DwarfTypeIndex& ix, DwarfTypeId storage) {
  const std::string& name = ix.type(storage).name;
  if (!starts_with(name, "__gnu_cxx::__aligned_membuf<") && !starts_with(name, "__gnu_cxx::__aligned_buffer<"))
    return kNoDwarfType;
  return ix.find_structure(template_argument(name, 0));
}

namespace {

// Inside a container, a pointer to a node base really points to a whole node.
bool is_base_of_node(const std::string& base, const std::string& node) {
  return (base == "std::_Rb_tree_node_base" && starts_with(node, "std::_Rb_tree_node<")) ||
         (base == "std::__detail::_List_node_base" && starts_with(node, "std::_List_node<")) ||
         (base == "std::__detail::_Hash_node_base" && starts_with(node, "std::__detail::_Hash_node<"));
}

class Propagator {
 public:
  Propagator(const Image& image, const HeapModel& heap, BlockTypes& types, DwarfTypes& dwarf)
      : image_(image), heap_(heap), index_(heap), types_(types), dwarf_(dwarf), mem_(image) {
    dwarf_.block_types.assign(heap.blocks.size(), DwarfTypeRef{});
    seen_typed_.assign(heap.blocks.size(), false);
  }

  void seed(std::uint16_t module, Address address, DwarfTypeId type) {
    visit(address, module, type, kNoDwarfType, 0);
    drain();
  }

 private:
  struct Pending {
    Address address;
    std::uint16_t module;
    DwarfTypeId type;
    std::uint64_t count;
    DwarfTypeId node;
  };

  const Image& image_;
  const HeapModel& heap_;
  BlockIndex index_;
  BlockTypes& types_;
  DwarfTypes& dwarf_;
  MemoryCursor mem_;
  std::vector<Pending> queue_;
  std::unordered_map<std::uint64_t, std::uint32_t> name_ids_;
  std::vector<bool> seen_typed_;  // symbol-typed blocks already looked up by name

  void drain() {
    while (!queue_.empty()) {
      const Pending p = queue_.back();
      queue_.pop_back();
      const std::uint64_t size = dwarf_.index(p.module)->type(p.type).size;
      for (std::uint64_t i = 0; i < p.count; ++i) visit(p.address + i * size, p.module, p.type, p.node, 0);
    }
  }

  void visit(Address at, std::uint16_t module, DwarfTypeId id, DwarfTypeId node, int depth) {
    const DwarfTypeIndex& ix = *dwarf_.index(module);
    id = ix.definition(id);
    if (id == kNoDwarfType || depth > kMaxNesting) return;
    const DwarfType& t = ix.type(id);
    if (!t.has_pointers) return;
    switch (t.kind) {
      case DwarfType::Kind::structure: {
        if (const DwarfTypeId stored = stored_value_type(ix, id); stored != kNoDwarfType) {
          visit(at, module, stored, node, depth + 1);
          return;
        }
        const DwarfTypeId own = node_type_of(ix, id);
        for (const DwarfTypeMember& m : ix.members(id))
          visit(at + m.offset, module, m.type, own != kNoDwarfType ? own : node, depth + 1);
        return;
      }
      case DwarfType::Kind::array: {
        const DwarfType& element = ix.type(ix.definition(t.target));
        const std::uint64_t count = std::min(t.count, kMaxElements);
        for (std::uint64_t i = 0; i < count && element.size; ++i)
          visit(at + i * element.size, module, t.target, node, depth + 1);
        return;
      }
      case DwarfType::Kind::pointer:
        follow(at, module, t.target, node);
        return;
      default:
        return;
    }
  }

  void follow(Address at, std::uint16_t module, DwarfTypeId pointee, DwarfTypeId node) {
    const DwarfTypeIndex& ix = *dwarf_.index(module);
    pointee = ix.definition(pointee);
    if (pointee == kNoDwarfType) return;  // void*
    if (node != kNoDwarfType && is_base_of_node(ix.type(pointee).name, ix.type(node).name)) pointee = node;
    const DwarfType& target = ix.type(pointee);
    if (target.size == 0 || target.kind == DwarfType::Kind::function) return;
    const auto value = mem_.u64(at);
    if (!value || *value == 0) return;
    const BlockId b = index_.find(*value);
    if (b == kNoBlock) return;
    const Block& block = heap_.blocks[b];
    if (block.address() != *value || dwarf_.block_types[b].known() || seen_typed_[b]) return;
    if (types_.type_id(b) != BlockTypes::kUnknown) {
      walk_symbol_typed(b, module, node);
      return;
    }
    const std::uint64_t count = block.usable_size() / target.size;
    if (count == 0) return;  // the block is too small to hold one: not what the pointer says
    dwarf_.block_types[b] = DwarfTypeRef{module, pointee};
    types_.set(b, name_id(module, pointee, count > 1));
    if (target.has_pointers) queue_.push_back({*value, module, pointee, std::min(count, kMaxElements), node});
  }

  // A block typed by its vtable (or as a functor, a coroutine frame) keeps that name, but its members are
  // followed as the DWARF structure of the same name says, when there is one: a shared_ptr's control block
  // holds the object made by make_shared.
  void walk_symbol_typed(BlockId b, std::uint16_t module, DwarfTypeId node) {
    seen_typed_[b] = true;
    const Block& block = heap_.blocks[b];
    const DwarfTypeIndex& ix = *dwarf_.index(module);
    const DwarfTypeId named = ix.find_structure(types_.name(b, block));
    if (named == kNoDwarfType || ix.type(named).size > block.usable_size()) return;
    dwarf_.block_types[b] = DwarfTypeRef{module, named};
    if (ix.type(named).has_pointers) queue_.push_back({block.address(), module, named, 1, node});
  }

  std::uint32_t name_id(std::uint16_t module, DwarfTypeId type, bool array) {
    const std::uint64_t key = (std::uint64_t{module} << 33) | (std::uint64_t{type} << 1) | (array ? 1 : 0);
    auto [it, fresh] = name_ids_.try_emplace(key, 0);
    if (fresh) {
      std::string name = dwarf_.index(module)->type(type).name;
      if (name.empty()) name = "(anonymous)";
      it->second = types_.intern(array ? name + "[]" : name);
      types_.set_source(it->second, dwarf_.index(module)->type(type).declared.describe());
    }
    return it->second;
  }
};

}  // namespace

const DwarfTypeIndex* DwarfTypes::index(std::size_t module) const {
  auto [it, fresh] = loaded_.try_emplace(module);
  if (!fresh) return it->second.index.get();
  const Module& m = image_.modules()[module];
  const ModuleSymbols* syms = m.file_on_disk.empty() ? nullptr : symbols_.symbols_for(m);
  if (!syms) return nullptr;
  const std::string path = syms->debug_file().empty() ? syms->path() : syms->debug_file();
  it->second.file = DwarfFile::open(path, nullptr);
  if (it->second.file) it->second.index = DwarfTypeIndex::build(*it->second.file);
  return it->second.index.get();
}

void type_blocks_from_dwarf(const Image& image, const SymbolIndex& symbols, const HeapModel& heap,
                            BlockTypes& types, DwarfTypes& dwarf) {
  Propagator propagate(image, heap, types, dwarf);
  const std::vector<StaticTlsBlock> tls = static_tls_blocks(image, symbols);
  const auto& modules = image.modules();
  for (std::size_t m = 0; m < modules.size() && m < DwarfTypeRef::kNoModule; ++m) {
    const DwarfTypeIndex* ix = dwarf.index(m);
    if (!ix) continue;
    const auto module = static_cast<std::uint16_t>(m);
    for (const DwarfVariable& v : ix->variables()) {
      if (!v.tls) {
        propagate.seed(module, modules[m].load_bias + v.address, v.type);
        continue;
      }
      for (const StaticTlsBlock& block : tls) {
        if (block.module != &modules[m]) continue;
        for (const ThreadState& thread : image.threads())
          if (thread.fs_base()) propagate.seed(module, thread.fs_base() + block.start + v.address, v.type);
      }
    }
  }
}

namespace {

std::string member_path(const DwarfTypeIndex& ix, DwarfTypeId id, std::uint64_t offset, int depth) {
  id = ix.definition(id);
  if (id == kNoDwarfType || depth > kMaxNesting) return {};
  const DwarfType& t = ix.type(id);
  if (t.kind == DwarfType::Kind::array) {
    const DwarfType& element = ix.type(ix.definition(t.target));
    if (element.size == 0) return {};
    return fmt::format("[{}]", offset / element.size) + member_path(ix, t.target, offset % element.size, depth + 1);
  }
  if (t.kind != DwarfType::Kind::structure) return {};
  for (const DwarfTypeMember& m : ix.members(id)) {
    const DwarfTypeId member = ix.definition(m.type);
    const std::uint64_t size = member == kNoDwarfType ? 0 : ix.type(member).size;
    if (offset < m.offset || offset >= m.offset + std::max<std::uint64_t>(size, 1)) continue;
    if (m.base_class) return member_path(ix, member, offset - m.offset, depth + 1);
    const std::string here = "." + m.name;
    // Inside a library type (std::vector's _M_impl._M_start, ...), the member's own name says enough.
    if (member == kNoDwarfType || starts_with(ix.type(member).name, "std::")) return here;
    return here + member_path(ix, member, offset - m.offset, depth + 1);
  }
  return {};
}

}  // namespace

std::string field_at(const DwarfTypes& dwarf, DwarfTypeRef ref, std::uint64_t offset) {
  if (!ref.known()) return {};
  const DwarfTypeIndex* ix = dwarf.index(ref.module);
  const DwarfTypeId id = ix ? ix->definition(ref.type) : kNoDwarfType;
  if (id == kNoDwarfType || ix->type(id).size == 0) return {};
  const std::uint64_t size = ix->type(id).size;
  // A block holding several objects: which one, then where in it.
  std::string element = offset >= size ? fmt::format("[{}]", offset / size) : std::string();
  const std::string inside = member_path(*ix, id, offset % size, 0);
  if (element.empty() && inside.empty() && ix->type(id).kind == DwarfType::Kind::pointer) return "[0]";
  return element + inside;
}

std::string variable_field(const Image& image, const DwarfTypes& dwarf, std::size_t module, Address address) {
  const DwarfTypeIndex* ix = module < image.modules().size() ? dwarf.index(module) : nullptr;
  if (!ix) return {};
  const Address link_time = address - image.modules()[module].load_bias;
  for (const DwarfVariable& v : ix->variables()) {
    if (v.tls || link_time < v.address) continue;
    const DwarfTypeId id = ix->definition(v.type);
    if (id == kNoDwarfType || link_time >= v.address + ix->type(id).size) continue;
    return member_path(*ix, id, link_time - v.address, 0);
  }
  return {};
}

}  // namespace heapscope
