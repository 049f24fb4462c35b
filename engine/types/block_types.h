// Types of heap blocks from symbols (DWARF typing of every block comes later): a C++ object's vtable pointer
// at offset 0 names its dynamic type (by the vtable's symbol, or on a stripped binary by the RTTI the vtable
// points to, or without RTTI as "class with vtable app+0x…"); a functor stored by std::function is named by its libstdc++ manager
// function, found next to the pointer to it, and DWARF adds where the functor (a lambda) was written;
// coroutine frames by their resume/destroy clones. Everything else is "unknown (N bytes)" until DWARF
// typing (dwarf_typing) and the namers of leaked blocks (leak_naming) have had their turn. Each type id
// keeps the evidence that named it (types/naming.h).
#pragma once

#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/bit_array.h"
#include "model/block_index.h"
#include "model/roots.h"
#include "heap/heap_model.h"
#include "symbols/symbol_index.h"
#include "types/coroutine_frames.h"
#include "types/naming.h"
#include "types/type_id_array.h"

namespace heapscope {

class BlockTypes {
 public:
  static constexpr std::uint32_t kUnknown = 0;

  BlockTypes() : names_{""}, sources_{""}, namings_{Naming::none}, id_of_name_{{"", kUnknown}} {}
  std::uint32_t type_id(std::size_t block) const {
    if (!subset_) return block < ids_.size() ? ids_[block] : kUnknown;
    const std::size_t slot = member_slot(block);
    return slot == kNotMember ? kUnknown : ids_[slot];
  }
  // The type's name, or "unknown (N bytes)" for untyped blocks.
  std::string name(std::size_t block, const Block& b) const;
  const std::string& name_of(std::uint32_t id) const { return names_[id]; }
  // The id of `name`, made on first use with the evidence that named it; a name interned again keeps its
  // first evidence (a vtable symbol's class that DWARF names too stays "symbol"). Inferred names carry
  // their mark ("T?"), so they never share an id with a certain name.
  std::uint32_t intern(const std::string& name, Naming naming);
  Naming naming_of(std::uint32_t id) const { return id < namings_.size() ? namings_[id] : Naming::none; }
  Naming naming(std::size_t block) const { return naming_of(type_id(block)); }
  std::size_t type_count() const { return names_.size(); }  // ids are below this
  void rename(std::uint32_t id, std::string name);
  // Where the type was declared ("client.h:12"), when DWARF says; empty otherwise.
  const std::string& source_of(std::uint32_t id) const { return sources_[id < sources_.size() ? id : 0]; }
  void set_source(std::uint32_t id, std::string source);
  // With ids for a subset of the blocks (resize_for), a block outside it keeps no name: it stays unknown.
  void set(std::size_t block, std::uint32_t id) {
    if (!subset_) {
      ids_.set(block, id);
    } else if (const std::size_t slot = member_slot(block); slot != kNotMember) {
      ids_.set(slot, id);
    }
  }
  // Types named by a vtable at offset 0 (infer_types): what a block holds at its start, not necessarily
  // all of it.
  void mark_from_vtable(std::uint32_t id);
  bool from_vtable(std::uint32_t id) const { return id < from_vtable_.size() && from_vtable_[id]; }
  // The type of blocks that start with an object of type `id` but are much larger than it (an arena's
  // slab, a bump allocator's chunk): "T (first of a larger block)", a row of its own, so that T's count
  // and bytes are those of real T objects. first_object_type gives T's id back (kUnknown for other ids).
  std::uint32_t first_of_larger(std::uint32_t id);
  std::uint32_t first_object_type(std::uint32_t id) const { return id < first_of_.size() ? first_of_[id] : kUnknown; }
  // An id for each of `blocks` blocks, all unknown.
  void resize(std::size_t blocks);
  // Ids for `members` alone (sorted ids of a heap of `blocks` blocks): naming the leaks of a large heap
  // then costs memory and page faults for the leaks, not 4 bytes for every block of the heap.
  void resize_for(std::size_t blocks, std::span<const BlockId> members);
  std::size_t typed_blocks() const;

  // What the index cache keeps of a whole heap's types (session/block_names_json): each type id's name,
  // where it was declared, its evidence, whether a vtable named it and the T of "T (first of a larger
  // block)"; and the id of every block (ids(): types with an id per block, not resize_for's subset).
  struct SavedType {
    std::string name, source;
    Naming naming = Naming::none;
    bool from_vtable = false;
    std::uint32_t first_of = kUnknown;
  };
  std::vector<SavedType> saved_types() const;
  const TypeIdArray& ids() const { return ids_; }
  static BlockTypes restored(std::vector<SavedType> types, TypeIdArray ids);

 private:
  static constexpr std::size_t kNotMember = RankedBits::kNotMember;
  // Where block `block`'s id is in ids_ when ids are kept for a subset: its rank among the members.
  std::size_t member_slot(std::size_t block) const { return members_.slot_of(block); }

  TypeIdArray ids_;  // by block, or by member (subset_)
  bool subset_ = false;
  RankedBits members_;  // subset_: the blocks ids_ holds an id for
  std::vector<std::string> names_;
  std::vector<std::string> sources_;  // by type id, like names_
  std::vector<Naming> namings_;       // by type id, like names_
  // Each name's lowest id: intern's lookup, once a search of names_ (a heap with tens of thousands of
  // type names interned them in quadratic time).
  std::unordered_map<std::string, std::uint32_t> id_of_name_;
  std::vector<bool> from_vtable_;           // by type id
  std::vector<std::uint32_t> first_of_;     // by type id: T's id for "T (first of a larger block)"
};

// With `within` (a flag per block, closed under predecessors: graph_closure.h's ancestors_of), only the
// blocks in it are typed, and only they and the roots are read: the names they get are the same as over
// the whole heap.
// `members`, when given (with `within`), lists the blocks `within` flags, in order, none or many: the passes
// then visit them without reading every block's flag, and the types keep ids for them alone
// (BlockTypes::resize_for).
BlockTypes infer_types(const Image& image, const SymbolIndex& symbols, const HeapModel& heap, const BlockIndex& index,
                       const RootSet& roots, const std::vector<bool>* within = nullptr,
                       const std::vector<BlockId>* members = nullptr);

// The class the RTTI of the vtable `vptr` names (what a stripped binary's objects are named by); empty
// when the vtable has no type_info (-fno-rtti) or is no vtable. For the precision benchmark, which checks
// it against the vtable's symbol.
std::string class_named_by_rtti(const Image& image, Address vptr);

// Types each coroutine frame "coroutine frame <function>".
void type_coroutine_frames(BlockTypes& types, const CoroutineFrames& coroutines);

// "std::_Function_base::_Base_manager<main::{lambda()#1}>::_M_manager(...)" → "main::{lambda()#1}"; empty when
// the name is not a std::function manager.
std::string functor_type_from_manager(const std::string& demangled);

}  // namespace heapscope
