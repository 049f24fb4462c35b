#include "types/dwarf_typing.h"

#include <fmt/format.h>

#include <unordered_map>

#include "image/memory_cursor.h"
#include "base/phase_timer.h"
#include "base/progress.h"
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

// How much a type says about a block: a structure more than a pointer, a pointer more than plain data.
bool is_character(const DwarfType& t) {
  return t.kind == DwarfType::Kind::base && (t.name == "char" || t.name == "signed char" ||
                                             t.name == "unsigned char" || t.name == "char8_t");
}

int specificity(const DwarfType& t) {
  switch (t.kind) {
    case DwarfType::Kind::structure: return 3;
    case DwarfType::Kind::pointer: return 2;
    default: return 1;
  }
}

class Propagator {
 public:
  // `evidence`: Naming::dwarf when the seeds are certain (typed roots, blocks named by their vtable),
  // Naming::inferred when they are guesses (layout inference): then every name given is inferred too, and
  // blocks already named keep their names.
  Propagator(const Image& image, const HeapModel& heap, const BlockIndex& index, BlockTypes& types, DwarfTypes& dwarf,
             const std::vector<bool>* within, Naming evidence = Naming::dwarf)
      : heap_(heap), index_(index), types_(types), dwarf_(dwarf), within_(within), mem_(image), evidence_(evidence) {
    walked_.assign(heap.blocks.size(), false);
    progress_total(heap.blocks.size());
    indexes_.resize(std::min<std::size_t>(image.modules().size(), DwarfTypeRef::kNoModule), nullptr);
    loaded_.resize(indexes_.size(), false);
  }

  void seed(std::uint16_t module, Address address, DwarfTypeId type) {
    if (!index(module)) return;
    visit(address, module, type, kNoDwarfType);
    drain();
  }

  // A heap block known (or inferred) to hold one `type`: named so, and followed as from a root.
  void seed_block(BlockId b, std::uint16_t module, DwarfTypeId type) {
    if (!index(module)) return;
    types_.set(b, name_id(module, type, false));
    if (index(module)->type(type).has_pointers) enqueue(heap_.blocks[b].address(), module, type, 1, kNoDwarfType);
    drain();
  }

  // A heap block named by a symbol or its RTTI: followed by the DWARF layout of its class, when a module
  // defines one.
  void seed_symbol_typed(BlockId b) {
    const std::uint32_t id = types_.type_id(b);
    DwarfTypeRef ref = dwarf_.of_type_id(id);
    for (std::size_t m = 0; !ref.known() && m < indexes_.size(); ++m) {
      const DwarfTypeId found = index(m) ? index(m)->find_structure(types_.name_of(id)) : kNoDwarfType;
      if (found != kNoDwarfType) ref = DwarfTypeRef{static_cast<std::uint16_t>(m), found};
    }
    if (!ref.known()) return;
    walk_symbol_typed(b, ref.module, kNoDwarfType);
    drain();
  }

 private:
  static constexpr DwarfTypeId kNotComputed = kNoDwarfType - 1;

  struct Pending {
    Address address;
    std::uint16_t module;
    DwarfTypeId type;
    std::uint64_t count;  // kDeferredMark: the top of `deferred_` (see defer()); otherwise 1 or more
    DwarfTypeId node;
  };
  static constexpr std::uint64_t kDeferredMark = 0;
  // An array of at least this many elements has its pointers' walks deferred (defer()).
  static constexpr std::uint64_t kDeferFrom = 64;

  // How following a pointer left the block it points to: nothing of its own to walk, or its pointers to
  // be walked as the pointer's type says, or as the DWARF structure named like its symbol type.
  enum class Walk : std::uint8_t { none = 0, as_pointed = 1, as_symbol_typed = 2 };

  // Where a pointer leads: the block, and the type (resolved; a node base taken for the whole node) and
  // node it is followed with. target_of() only reads: asked again, it answers the same.
  struct Target {
    BlockId block;
    Address address;
    std::uint16_t module;
    DwarfTypeId type, node;
  };

  // A pointer a type holds, as visit() reaches it from the type's start: where it is, what it points to,
  // and the node type it is followed with (kInheritNode: the one visit() was given).
  struct PointerSlot {
    std::uint64_t offset;
    DwarfTypeId pointee;
    DwarfTypeId node;
  };
  static constexpr DwarfTypeId kInheritNode = kNoDwarfType - 2;
  static constexpr std::int32_t kNoPlan = -1, kPlanNotMade = -2;
  static constexpr std::size_t kMostSlots = 64;  // a larger type (a long array of pointers) is walked as before

  // Per module and type id, computed on first use: what name tests would otherwise redo on every visit.
  struct TypeFacts {
    std::vector<DwarfTypeId> node, stored;
    // The type's pointers in visit()'s order (an index into `plans`), when it has at most kMostSlots: a
    // heap of millions of one type then costs a loop over its pointers per block, not a walk of its
    // members through the index.
    std::vector<std::int32_t> plan;
    std::vector<std::vector<PointerSlot>> plans;
  };

  const HeapModel& heap_;
  const BlockIndex& index_;
  BlockTypes& types_;
  DwarfTypes& dwarf_;
  const std::vector<bool>* within_;  // the blocks to type; null: all
  MemoryCursor mem_;
  // By module, read on first use: typing from a few leaked blocks needs their modules' DWARF only.
  std::vector<const DwarfTypeIndex*> indexes_;
  std::vector<bool> loaded_;

  const DwarfTypeIndex* index(std::size_t module) {
    if (module >= indexes_.size()) return nullptr;
    if (!loaded_[module]) {
      indexes_[module] = dwarf_.index(module);
      loaded_[module] = true;
    }
    return indexes_[module];
  }
  std::vector<TypeFacts> facts_;
  std::vector<Pending> queue_;
  // The arrays whose pointers' walks were deferred, innermost last: each has its mark on the queue, and
  // the walks still to come (a Walk in 2 bits per element and pointer slot, below `next`).
  struct Deferred {
    Address address;
    std::uint64_t element_size;
    std::uint16_t module;
    DwarfTypeId node;
    std::vector<PointerSlot> slots;
    std::vector<std::uint64_t> walks;
    std::uint64_t next;
  };
  std::vector<Deferred> deferred_;
  std::unordered_map<std::uint64_t, std::uint32_t> name_ids_;
  std::uint64_t last_name_key_ = ~std::uint64_t{0};  // name_id's last answer
  std::uint32_t last_name_id_ = 0;
  Naming evidence_;
  std::vector<bool> walked_;       // by block: a symbol-typed block whose members were followed
  std::uint32_t drained_ = 0;      // queue entries since progress was last told

  // Field by field into the queue's new slot: a whole Pending built first and copied in was a store the
  // copy's wide load had to wait for, a quarter of the time of a visit.
  void enqueue(Address address, std::uint16_t module, DwarfTypeId type, std::uint64_t count, DwarfTypeId node) {
    Pending& p = queue_.emplace_back();
    p.address = address;
    p.module = module;
    p.type = type;
    p.count = count;
    p.node = node;
  }

  DwarfTypeId cached(std::vector<DwarfTypeId>& cache, DwarfTypeId id, DwarfTypeId (*compute)(const DwarfTypeIndex&, DwarfTypeId),
                     const DwarfTypeIndex& ix) {
    if (id >= cache.size()) cache.resize(ix.type_count(), kNotComputed);
    if (cache[id] == kNotComputed) cache[id] = compute(ix, id);
    return cache[id];
  }

  TypeFacts& facts(std::uint16_t module) {
    if (module >= facts_.size()) facts_.resize(module + 1);
    return facts_[module];
  }

  // Progress counts the entries taken off the queue (about one per block typed), against the heap's
  // blocks; told every kProgressEntries (throws Interrupted on Ctrl-C).
  void drain() {
    constexpr std::uint32_t kProgressEntries = 1 << 16;
    while (!queue_.empty()) {
      if (++drained_ == kProgressEntries) {
        progress_step(drained_);
        drained_ = 0;
      }
      // Field by field, as enqueue() wrote them: the entry was mostly pushed just now, and one wide load
      // of it would wait for those narrower stores to retire (a third of the time of a pop).
      const Pending& top = queue_.back();
      const Address address = top.address;
      const std::uint16_t module = top.module;
      const DwarfTypeId type = top.type, node = top.node;
      const std::uint64_t count = top.count;
      if (count == kDeferredMark) {
        walk_deferred();
        continue;
      }
      queue_.pop_back();
      const std::uint64_t size = index(module)->type(type).size;
      if (count >= kDeferFrom)
        if (const std::vector<PointerSlot>* slots = plan_of(module, *index(module), type)) {
          defer(address, size, count, module, node, *slots);
          continue;
        }
      for (std::uint64_t i = 0; i < count; ++i) visit(address + i * size, module, type, node);
    }
  }

  // An array's elements, followed as visit() follows them (every block they point to named now), with the
  // walks of those blocks' own pointers noted rather than queued: a vector of a million pointers queued a
  // million entries of 32 bytes, where 2 bits each will do. walk_deferred() queues each when its turn
  // comes, last first, which is the order the queue would have given them.
  void defer(Address address, std::uint64_t size, std::uint64_t count, std::uint16_t module, DwarfTypeId node,
             const std::vector<PointerSlot>& slots) {
    const std::uint64_t walks = count * slots.size();
    Deferred d{address, size, module, node, slots, std::vector<std::uint64_t>((walks + 31) / 32, 0), walks};
    bool any = false;
    for (std::uint64_t i = 0; i < count; ++i)
      for (std::size_t k = 0; k < slots.size(); ++k) {
        if (((i * slots.size() + k) & kCheckMask) == 0) progress_check();  // 2^24 elements may take seconds
        const std::optional<Target> t = target_of(address + i * size + slots[k].offset, module, slots[k].pointee,
                                                  slot_node(slots[k], node));
        const Walk how = t ? name_target(*t) : Walk::none;
        if (how == Walk::none) continue;
        const std::uint64_t at = i * slots.size() + k;
        d.walks[at / 32] |= static_cast<std::uint64_t>(how) << (2 * (at % 32));
        any = true;
      }
    if (!any) return;
    deferred_.push_back(std::move(d));
    enqueue(address, module, kNoDwarfType, kDeferredMark, node);
  }

  // The innermost deferred array's next walk (from its last element back) onto the queue, above its mark;
  // once it has none left, it and its mark are gone.
  void walk_deferred() {
    Deferred& d = deferred_.back();
    while (d.next > 0) {
      const std::uint64_t at = --d.next;
      const auto how = static_cast<Walk>(d.walks[at / 32] >> (2 * (at % 32)) & 3);
      if (how == Walk::none) continue;
      const PointerSlot& slot = d.slots[at % d.slots.size()];
      const Address pointer = d.address + (at / d.slots.size()) * d.element_size + slot.offset;
      if (const std::optional<Target> t = target_of(pointer, d.module, slot.pointee, slot_node(slot, d.node))) {
        enqueue_walk(*t, how);
        return;
      }
    }
    deferred_.pop_back();
    queue_.pop_back();
  }

  static DwarfTypeId slot_node(const PointerSlot& slot, DwarfTypeId node) {
    return slot.node == kInheritNode ? node : slot.node;
  }

  // Follows every pointer of the `id` object at `at`: from the type's plan when it has one, else by
  // walking its members through the index.
  void visit(Address at, std::uint16_t module, DwarfTypeId id, DwarfTypeId node) {
    const DwarfTypeIndex& ix = *index(module);
    if (const std::vector<PointerSlot>* slots = plan_of(module, ix, id)) {
      // A tree's nodes lie in no order the walk follows: each pointer's lookup is a miss in the page table,
      // then one in the blocks. Hinted for all of them first, a node's misses overlap (a tenth of the
      // mixed heap's typing, when it runs alone).
      if (slots->size() > 1) {
        for (const PointerSlot& slot : *slots) index_.prefetch_page(mem_.u64(at + slot.offset).value_or(0));
        for (const PointerSlot& slot : *slots) index_.prefetch_block(mem_.u64(at + slot.offset).value_or(0));
      }
      for (const PointerSlot& slot : *slots) follow(at + slot.offset, module, slot.pointee, slot_node(slot, node));
      return;
    }
    auto follow_at = [&](std::uint64_t offset, DwarfTypeId pointee, DwarfTypeId slot_node) {
      follow(at + offset, module, pointee, slot_node);
      return true;
    };
    for_each_pointer(module, ix, id, 0, node, 0, follow_at);
  }

  // The plan of `id` (see TypeFacts::plan), made on first use; null when it has too many pointers.
  const std::vector<PointerSlot>* plan_of(std::uint16_t module, const DwarfTypeIndex& ix, DwarfTypeId id) {
    TypeFacts& f = facts(module);
    if (id >= f.plan.size()) f.plan.resize(std::max<std::size_t>(ix.type_count(), id + 1), kPlanNotMade);
    if (f.plan[id] == kPlanNotMade) {
      std::vector<PointerSlot> slots;
      auto record = [&](std::uint64_t offset, DwarfTypeId pointee, DwarfTypeId slot_node) {
        if (slots.size() == kMostSlots) return false;
        slots.push_back({offset, pointee, slot_node});
        return true;
      };
      if (for_each_pointer(module, ix, id, 0, kInheritNode, 0, record)) {
        f.plan[id] = static_cast<std::int32_t>(f.plans.size());
        f.plans.push_back(std::move(slots));
      } else {
        f.plan[id] = kNoPlan;
      }
    }
    return f.plan[id] == kNoPlan ? nullptr : &f.plans[static_cast<std::size_t>(f.plan[id])];
  }

  // Calls fn(offset, pointee, node) for each pointer of type `id` placed at `offset`, in member order
  // (`node`: the node type the pointer is followed with, a container's own passed down to its members);
  // the one walk of a type's layout, for a visit and for a plan. Stops, and gives false, once fn does.
  template <class Fn>
  bool for_each_pointer(std::uint16_t module, const DwarfTypeIndex& ix, DwarfTypeId id, std::uint64_t offset,
                        DwarfTypeId node, int depth, Fn& fn) {
    id = ix.definition(id);
    if (id == kNoDwarfType || depth > kMaxNesting) return true;
    const DwarfType& t = ix.type(id);
    if (!t.has_pointers) return true;
    switch (t.kind) {
      case DwarfType::Kind::structure: {
        TypeFacts& f = facts(module);
        if (const DwarfTypeId stored = cached(f.stored, id, stored_value_type, ix); stored != kNoDwarfType)
          return for_each_pointer(module, ix, stored, offset, node, depth + 1, fn);
        const DwarfTypeId own = cached(f.node, id, node_type_of, ix);
        for (const DwarfTypeMember& m : ix.members(id))
          if (!for_each_pointer(module, ix, m.type, offset + m.offset, own != kNoDwarfType ? own : node, depth + 1, fn))
            return false;
        return true;
      }
      case DwarfType::Kind::array: {
        const DwarfType& element = ix.type(ix.definition(t.target));
        const std::uint64_t count = std::min(t.count, kMaxElements);
        for (std::uint64_t i = 0; i < count && element.size; ++i)
          if (!for_each_pointer(module, ix, t.target, offset + i * element.size, node, depth + 1, fn)) return false;
        return true;
      }
      case DwarfType::Kind::pointer:
        return fn(offset, ix.pointee(id), node);
      default:
        return true;
    }
  }

  void follow(Address at, std::uint16_t module, DwarfTypeId pointee, DwarfTypeId node) {
    const std::optional<Target> t = target_of(at, module, pointee, node);
    if (!t) return;
    if (const Walk how = name_target(*t); how != Walk::none) enqueue_walk(*t, how);
  }

  std::optional<Target> target_of(Address at, std::uint16_t module, DwarfTypeId pointee, DwarfTypeId node) {
    const DwarfTypeIndex& ix = *index(module);
    pointee = ix.definition(pointee);
    if (pointee == kNoDwarfType) return std::nullopt;  // void*
    if (node != kNoDwarfType && is_base_of_node(ix.type(pointee).name, ix.type(node).name)) pointee = node;
    const DwarfType& target = ix.type(pointee);
    if (target.size == 0 || target.kind == DwarfType::Kind::function) return std::nullopt;
    const std::uint64_t value = mem_.u64(at).value_or(0);  // unreadable or null: nothing to follow
    if (value == 0) return std::nullopt;
    const BlockId b = index_.starting_at(value);
    if (b == kNoBlock || (within_ && !(*within_)[b])) return std::nullopt;
    return Target{b, value, module, pointee, node};
  }

  // Names the block `t` points to as its pointer says, when it may (see below); says how that block's own
  // pointers are to be walked.
  Walk name_target(const Target& t) {
    const DwarfType& target = index(t.module)->type(t.type);
    const Block& block = heap_.blocks[t.block];
    const std::uint32_t had = types_.type_id(t.block);
    // A shape's name ("std::vector body", "std::list node") says what the owner's DWARF says, less: the
    // element or value type. That is added, by a guess too, as the guess's; but no character type, which
    // says less than "std::string body".
    const bool refines_shape = had != BlockTypes::kUnknown && types_.naming_of(had) == Naming::pattern &&
                               !is_character(target);
    if (had != BlockTypes::kUnknown && !refines_shape) {
      if (evidence_ == Naming::inferred) return Walk::none;  // a guess never renames
      if (!is_dwarf_named(had)) return claim_symbol_typed(t.block, t.module) ? Walk::as_symbol_typed : Walk::none;
      // A block already typed keeps its type unless this one is more specific (a structure rather than
      // the bytes a char* saw); ranks only rise, so a block is retyped at most twice.
      if (specificity(target) <= specificity(dwarf_.type(dwarf_.of_type_id(had)))) return Walk::none;
    }
    // One object of a structure ending in a flexible array fills the block; otherwise as many as fit.
    const std::uint64_t count = objects_in(target, block);
    if (count == 0 || target.size > block.usable_size()) return Walk::none;  // too small for what the pointer says
    types_.set(t.block, name_id(t.module, t.type, count > 1));
    return target.has_pointers ? Walk::as_pointed : Walk::none;
  }

  static std::uint64_t objects_in(const DwarfType& type, const Block& block) {
    return type.flexible ? 1 : block.usable_size() / type.size;
  }

  // Queues the walk of the pointers of the block `t` points to, as name_target() said.
  void enqueue_walk(const Target& t, Walk how) {
    if (how == Walk::as_symbol_typed) {
      const DwarfTypeRef ref = dwarf_.of_type_id(types_.type_id(t.block));
      enqueue(heap_.blocks[t.block].address(), ref.module, ref.type, 1, t.node);
      return;
    }
    const std::uint64_t count = objects_in(index(t.module)->type(t.type), heap_.blocks[t.block]);
    mem_.prefetch(t.address);  // its pointers are read when the walk comes to it, mostly soon
    enqueue(t.address, t.module, t.type, std::min(count, kMaxElements), t.node);
  }

  // A DWARF type named like a symbol type shares its id, and is treated as one: walked once per block.
  bool is_dwarf_named(std::uint32_t type_id) const {
    const Naming n = types_.naming_of(type_id);
    return n == Naming::dwarf || n == Naming::inferred;
  }

  // A block typed by its vtable (or as a functor, a coroutine frame) keeps that name, but its members are
  // followed as the DWARF structure of the same name says, when there is one: a shared_ptr's control block
  // holds the object made by make_shared.
  void walk_symbol_typed(BlockId b, std::uint16_t module, DwarfTypeId node) {
    if (claim_symbol_typed(b, module))
      enqueue_walk(Target{b, heap_.blocks[b].address(), module, kNoDwarfType, node}, Walk::as_symbol_typed);
  }

  // Whether the symbol-typed block `b` is to be walked now: the first time it is reached, when a module
  // (`module` asked first) defines the structure of its type's name, which fits it and holds pointers.
  bool claim_symbol_typed(BlockId b, std::uint16_t module) {
    if (walked_[b]) return false;
    walked_[b] = true;
    const std::uint32_t id = types_.type_id(b);
    if (id >= dwarf_.by_type_id.size()) dwarf_.by_type_id.resize(id + 1);
    DwarfTypeRef& ref = dwarf_.by_type_id[id];
    if (!ref.known()) {
      const DwarfTypeId named = index(module)->find_structure(types_.name(b, heap_.blocks[b]));
      if (named == kNoDwarfType) return false;
      ref = DwarfTypeRef{module, named};
    }
    const DwarfType& t = dwarf_.type(ref);
    return t.size <= heap_.blocks[b].usable_size() && t.has_pointers;
  }

  std::uint32_t name_id(std::uint16_t module, DwarfTypeId type, bool array) {
    const std::uint64_t key = (std::uint64_t{module} << 33) | (std::uint64_t{type} << 1) | (array ? 1 : 0);
    // Blocks are mostly named in runs of one type (a list's nodes, one after another).
    if (key == last_name_key_) return last_name_id_;
    auto [it, fresh] = name_ids_.try_emplace(key, 0);
    if (fresh) {
      const DwarfTypeIndex& in = *index(module);
      const DwarfType& t = in.type(type);
      std::string name = t.name.empty() ? std::string("(anonymous)") : t.name;
      if (array) name += "[]";
      if (evidence_ == Naming::inferred) name += kInferredMark;
      it->second = types_.intern(name, evidence_);
      types_.set_source(it->second, in.declared(type).describe());
      if (it->second >= dwarf_.by_type_id.size()) dwarf_.by_type_id.resize(it->second + 1);
      dwarf_.by_type_id[it->second] = DwarfTypeRef{module, type};
    }
    last_name_key_ = key;
    last_name_id_ = it->second;
    return it->second;
  }
};

}  // namespace

DwarfIndexes::DwarfIndexes(std::shared_ptr<const DwarfFiles> files, std::size_t modules) : files_(std::move(files)) {
  loaded_.resize(std::min<std::size_t>(modules, DwarfTypeRef::kNoModule));
  for (auto& l : loaded_) l = std::make_unique<Loaded>();
}

DwarfIndexes::DwarfIndexes(const Image& image, const SymbolIndex& symbols)
    : DwarfIndexes(std::make_shared<const DwarfFiles>(image, symbols), image.modules().size()) {}

const DwarfTypeIndex* DwarfIndexes::index(std::size_t module) const {
  if (module >= loaded_.size()) return nullptr;
  Loaded& l = *loaded_[module];
  std::lock_guard lock(l.mutex);
  if (l.done) return l.index.get();
  PhaseTimer timer("dwarf types: indexes");  // once per module
  // Interrupted (Ctrl-C): nothing kept, built again when next asked for, not taken for "no DWARF".
  if (std::shared_ptr<const DwarfFile> file = files_->of(module)) {
    const std::unique_lock reading = files_->lock(module);  // the unwinder may read the file meanwhile
    l.index = DwarfTypeIndex::build(*file);
    l.file = std::move(file);
  }
  l.done = true;
  return l.index.get();
}

void DwarfIndexes::load_all(const std::atomic<bool>& stop, const std::function<bool(std::size_t)>& wanted) const {
  for (std::size_t m = 0; m < loaded_.size() && !stop; ++m)
    if (!wanted || wanted(m)) index(m);
}

std::vector<bool> modules_pointing_to_blocks(const Image& image, const BlockIndex& index, const RootSet& roots,
                                             std::span<const StaticTlsBlock> tls) {
  const auto& modules = image.modules();
  std::vector<bool> pointing(modules.size(), false);
  MemoryCursor mem(image);
  auto any_block_start = [&](Address start, Address end) {
    for (Address at = start & ~Address{7}; at + 8 <= end; at += 8) {
      const std::uint64_t value = mem.u64(at).value_or(0);
      if (value && index.starting_at(value) != kNoBlock) return true;
    }
    return false;
  };
  std::vector<std::pair<Address, Address>> spans(modules.size(), {~Address{0}, 0});
  for (const RootRange& r : roots.ranges)
    if (r.kind == RootKind::global && r.module < modules.size()) {
      spans[r.module].first = std::min(spans[r.module].first, r.start);
      spans[r.module].second = std::max(spans[r.module].second, r.end);
    }
  for (std::size_t m = 0; m < modules.size(); ++m)
    pointing[m] = spans[m].first < spans[m].second && any_block_start(spans[m].first, spans[m].second);
  for (const StaticTlsBlock& block : tls) {
    const auto m = static_cast<std::size_t>(block.module - modules.data());
    for (const ThreadState& thread : image.threads())
      if (!pointing[m] && thread.fs_base())
        pointing[m] = any_block_start(thread.fs_base() + block.start, thread.fs_base() + block.start + block.size);
  }
  return pointing;
}

namespace {

// Each frame's local variables, typed by the DWARF of the module holding the frame's code. The unwinder
// read the same DWARF, so the type DIE offsets agree; a type whose size is not the variable's is not used.
void name_objects_in_larger_blocks(const Image& image, const HeapModel& heap, BlockTypes& types, DwarfTypes& dwarf);

void seed_locals(const Image& image, const std::vector<std::vector<Frame>>& frames, DwarfTypes& dwarf,
                 Propagator& propagate) {
  const auto& modules = image.modules();
  for (const std::vector<Frame>& thread : frames)
    for (const Frame& frame : thread) {
      const Module* module = image.module_at(frame.pc);
      if (!module || frame.variables.empty()) continue;
      const std::size_t m = static_cast<std::size_t>(module - modules.data());
      const DwarfTypeIndex* ix = m < DwarfTypeRef::kNoModule ? dwarf.index(m) : nullptr;
      if (!ix) continue;
      for (const FrameVariable& v : frame.variables) {
        const DwarfTypeId type = v.type_die ? ix->definition(ix->type_of_die(v.type_die)) : kNoDwarfType;
        if (type == kNoDwarfType || ix->type(type).size != v.end - v.start) continue;
        propagate.seed(static_cast<std::uint16_t>(m), v.start, type);
      }
    }
}

}  // namespace

std::vector<DwarfTypes::SavedRef> DwarfTypes::saved_refs() const {
  if (!saved_.empty()) return saved_;
  std::vector<SavedRef> out(by_type_id.size());
  for (std::size_t id = 0; id < out.size(); ++id)
    if (const DwarfTypeRef ref = by_type_id[id]; ref.known() && index(ref.module))
      out[id] = {ref.module, index(ref.module)->origin_die(ref.type)};
  return out;
}

void DwarfTypes::restore(std::vector<SavedRef> refs) {
  by_type_id.clear();
  saved_ = std::move(refs);
  resolved_.assign(saved_.size(), DwarfTypeRef{});
  std::size_t modules = 0;
  for (const SavedRef& r : saved_)
    if (r.module != DwarfTypeRef::kNoModule) modules = std::max<std::size_t>(modules, r.module + 1u);
  module_resolved_ = std::make_unique<std::once_flag[]>(modules);
}

DwarfTypeRef DwarfTypes::restored(std::uint32_t type_id) const {
  if (type_id >= saved_.size() || saved_[type_id].module == DwarfTypeRef::kNoModule) return {};
  const std::uint16_t module = saved_[type_id].module;
  std::call_once(module_resolved_[module], [&] {
    const DwarfTypeIndex* in = index(module);
    if (!in) return;
    for (std::size_t id = 0; id < saved_.size(); ++id)
      if (saved_[id].module == module)
        if (const DwarfTypeId type = in->type_of_die(saved_[id].die); type != kNoDwarfType)
          resolved_[id] = DwarfTypeRef{module, type};
  });
  return resolved_[type_id];
}

void type_blocks_from_dwarf(const Image& image, const SymbolIndex& symbols, const HeapModel& heap,
                            const BlockIndex& index, const RootSet& roots, const std::vector<std::vector<Frame>>* frames,
                            BlockTypes& types, DwarfTypes& dwarf, const std::vector<bool>* within) {
  Propagator propagate(image, heap, index, types, dwarf, within);
  const std::vector<StaticTlsBlock> tls = static_tls_blocks(image, symbols);
  const std::vector<bool> pointing = modules_pointing_to_blocks(image, index, roots, tls);
  const auto& modules = image.modules();
  for (std::size_t m = 0; m < modules.size() && m < DwarfTypeRef::kNoModule; ++m) {
    const DwarfTypeIndex* ix = pointing[m] ? dwarf.index(m) : nullptr;
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
  if (frames) seed_locals(image, *frames, dwarf, propagate);
  name_objects_in_larger_blocks(image, heap, types, dwarf);
}

namespace {

// A vtable at offset 0 names the object that starts a block, and a bump allocator's slab starts with an
// object too: a 4 KiB slab of clang declarations would count as one 4 KiB clang::CXXMethodDecl. So a
// block named by its vtable that has room for two of the object (and 256 bytes to spare, so that tiny
// classes in ordinary blocks stay what they are) is "T (first of a larger block)" instead, a type of its
// own, with T's DWARF layout for its first object. The size of T is DWARF's, from the first module that
// defines a structure of that name; without one, nothing tells an object from a slab.
void name_objects_in_larger_blocks(const Image& image, const HeapModel& heap, BlockTypes& types, DwarfTypes& dwarf) {
  constexpr std::uint64_t kSpareBytes = 256;
  const auto& modules = image.modules();
  std::vector<DwarfTypeRef> layout(types.type_count());  // by vtable-named type id
  bool any = false;
  for (std::uint32_t id = 1; id < types.type_count(); ++id) {
    if (!types.from_vtable(id)) continue;
    DwarfTypeRef ref = dwarf.of_type_id(id);
    for (std::size_t m = 0; !ref.known() && m < modules.size() && m < DwarfTypeRef::kNoModule; ++m) {
      const DwarfTypeIndex* ix = dwarf.index(m);
      const DwarfTypeId found = ix ? ix->find_structure(types.name_of(id)) : kNoDwarfType;
      if (found != kNoDwarfType && ix->type(found).size > 0) ref = DwarfTypeRef{static_cast<std::uint16_t>(m), found};
    }
    layout[id] = ref;
    any = any || ref.known();
  }
  if (!any) return;
  std::vector<std::uint32_t> larger(types.type_count(), BlockTypes::kUnknown);
  for (std::size_t b = 0; b < heap.blocks.size(); ++b) {
    const std::uint32_t id = types.type_id(b);
    if (id >= layout.size() || !layout[id].known()) continue;
    const std::uint64_t size = dwarf.type(layout[id]).size;
    if (heap.blocks[b].usable_size() < std::max(2 * size, size + kSpareBytes)) continue;
    if (larger[id] == BlockTypes::kUnknown) {
      larger[id] = types.first_of_larger(id);
      if (larger[id] >= dwarf.by_type_id.size()) dwarf.by_type_id.resize(larger[id] + 1);
      dwarf.by_type_id[larger[id]] = layout[id];
    }
    types.set(b, larger[id]);
  }
}

}  // namespace

void type_from_symbol_typed_blocks(const Image& image, const HeapModel& heap, const BlockIndex& index,
                                   std::span<const BlockId> blocks, BlockTypes& types, DwarfTypes& dwarf,
                                   const std::vector<bool>* within) {
  if (blocks.empty()) return;
  Propagator propagate(image, heap, index, types, dwarf, within, Naming::dwarf);
  for (const BlockId b : blocks) propagate.seed_symbol_typed(b);
}

void type_from_inferred_blocks(const Image& image, const HeapModel& heap, const BlockIndex& index,
                               std::span<const BlockId> blocks,
                               const std::function<std::optional<DwarfTypeRef>(BlockId)>& infer, BlockTypes& types,
                               DwarfTypes& dwarf, const std::vector<bool>* within) {
  if (blocks.empty()) return;
  Propagator propagate(image, heap, index, types, dwarf, within, Naming::inferred);
  for (const BlockId b : blocks) {
    if (types.type_id(b) != BlockTypes::kUnknown) continue;
    if (const std::optional<DwarfTypeRef> guess = infer(b)) propagate.seed_block(b, guess->module, guess->type);
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
    // A library object (a std::unordered_map global) is named by the variable; its insides are noise.
    if (starts_with(ix->type(id).name, "std::")) return {};
    return member_path(*ix, id, link_time - v.address, 0);
  }
  return {};
}

}  // namespace heapscope
