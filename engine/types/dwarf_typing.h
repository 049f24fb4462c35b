// Heap typing from DWARF, the way Go's viewcore types a Go heap: start from every variable whose type
// DWARF knows (globals, statics, TLS variables of every thread) and follow its layout — nested structures,
// arrays, pointer members — to the blocks the pointers lead to; a block reached at its start by a T* holds
// a T, or an array of T when it has room for several; its own pointers are followed in turn. A block keeps
// the first type it gets, and types from vtables, std::function managers and coroutine frames win over
// DWARF's. libstdc++'s node-based containers point to node bases (_Rb_tree_node_base, _List_node_base,
// _Hash_node_base); inside a container the node's full type is used instead, found by name from the
// container's template arguments.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "dwarf/dwarf_files.h"
#include "dwarf/type_index.h"
#include "frames/unwind.h"
#include "model/block_index.h"
#include "model/roots.h"
#include "runtime/static_tls.h"
#include "heap/heap_model.h"
#include "image/image.h"
#include "symbols/symbol_index.h"
#include "types/block_types.h"

namespace heapscope {

struct DwarfTypeRef {
  static constexpr std::uint16_t kNoModule = 0xffff;
  std::uint16_t module = kNoModule;  // index into Image::modules()
  DwarfTypeId type = kNoDwarfType;
  bool known() const { return module != kNoModule && type != kNoDwarfType; }
};

// The DWARF type index of each of the image's modules, built on first use and kept: a session has one,
// shared by all its namings, and a command that will need them all can build them ahead (load_all) on a
// thread of their own while the heap is walked. Each module's index is built under that module's own lock,
// so that the thread loading ahead and one typing blocks can ask at once; a built index is then used by one
// thread at a time (it resolves types as they are asked for).
class DwarfIndexes {
 public:
  // Over the image's `modules` modules' DWARF, as `files` opens it (shared with the unwinder).
  DwarfIndexes(std::shared_ptr<const DwarfFiles> files, std::size_t modules);
  DwarfIndexes(const Image& image, const SymbolIndex& symbols);  // with files of its own

  // Null when the module has no DWARF (none in the file, no separate debug file found).
  const DwarfTypeIndex* index(std::size_t module) const;
  // Builds the index of every module `wanted` (asked just before each; every module without it), in module
  // order, until `stop` is set.
  void load_all(const std::atomic<bool>& stop, const std::function<bool(std::size_t module)>& wanted = {}) const;

 private:
  std::shared_ptr<const DwarfFiles> files_;
  struct Loaded {
    std::mutex mutex;
    bool done = false;
    std::shared_ptr<const DwarfFile> file;  // what the index reads types from as they are asked for
    std::unique_ptr<DwarfTypeIndex> index;
  };
  std::vector<std::unique_ptr<Loaded>> loaded_;  // by module
};

// The DWARF type behind each of BlockTypes' type ids, over the modules' indexes: a block's DWARF type is
// that of its BlockTypes id, so no per-block array is kept.
class DwarfTypes {
 public:
  explicit DwarfTypes(std::shared_ptr<const DwarfIndexes> indexes) : indexes_(std::move(indexes)) {}
  DwarfTypes(const Image& image, const SymbolIndex& symbols)  // with indexes of its own
      : indexes_(std::make_shared<const DwarfIndexes>(image, symbols)) {}

  // Null when the module has no DWARF (none in the file, no separate debug file found).
  const DwarfTypeIndex* index(std::size_t module) const { return indexes_->index(module); }
  const DwarfType& type(DwarfTypeRef ref) const { return index(ref.module)->type(ref.type); }

  // The DWARF type of the blocks BlockTypes names `type_id` (unknown when DWARF has none).
  DwarfTypeRef of_type_id(std::uint32_t type_id) const {
    if (!saved_.empty()) return restored(type_id);
    return type_id < by_type_id.size() ? by_type_id[type_id] : DwarfTypeRef{};
  }
  DwarfTypeRef of_block(const BlockTypes& types, std::size_t block) const { return of_type_id(types.type_id(block)); }

  std::vector<DwarfTypeRef> by_type_id;  // indexed by BlockTypes type id
  std::vector<std::string> warnings;

  // A type id's DWARF type as the index cache keeps it: the module and the DIE the type was resolved
  // from, which give the same type in another process (DwarfTypeIds number types in the order asked for).
  struct SavedRef {
    std::uint16_t module = DwarfTypeRef::kNoModule;
    std::uint64_t die = 0;
  };
  std::vector<SavedRef> saved_refs() const;
  // The types of saved refs, instead of by_type_id: each resolved when first asked for, with the other
  // refs into its module, whose index is built then. A command about one block asks for a few types, of
  // one module or none, where building every module's index took most of its time (libc's alone 23 ms).
  // The refs are what this heapscope saved for the same modules (the index cache's key): a DIE that does
  // not resolve (its separate debug file gone since) leaves the type unknown, with no fields.
  void restore(std::vector<SavedRef> refs);

 private:
  DwarfTypeRef restored(std::uint32_t type_id) const;

  std::shared_ptr<const DwarfIndexes> indexes_;
  std::vector<SavedRef> saved_;                        // by type id, when restored
  mutable std::vector<DwarfTypeRef> resolved_;         // by type id, each module's once its flag is set
  std::unique_ptr<std::once_flag[]> module_resolved_;  // by module
};

// Per module of the image: whether an aligned word of its writable segments (the span its global roots
// cover, finalizer slots included) or of its static TLS block in some thread is the start of an allocated
// block. A variable's DWARF type leads to nothing else (Propagator::follow), so the variables of a module
// without one type nothing, and its DWARF need not be read for them. Words are read aligned, as the
// pointer scan reads them: a pointer at an odd offset of a packed structure is not looked at.
// `tls`: the image's static TLS blocks (static_tls_blocks).
std::vector<bool> modules_pointing_to_blocks(const Image& image, const BlockIndex& index, const RootSet& roots,
                                             std::span<const StaticTlsBlock> tls);

// Types the blocks BlockTypes left unknown, from the modules' variables; names them in `types` ("Client",
// "char[]" for a block holding several chars) and records each block's DWARF type in `dwarf`. Only the
// modules modules_pointing_to_blocks finds have their variables read.
// With the threads' `frames` (may be null), the local variables DWARF locates are typed roots too. With
// `within` (closed under predecessors, as infer_types takes it), pointers are followed into its blocks
// only: every block in it gets the type the whole-heap pass would give it, since each type arrives along
// a chain of pointers whose blocks all lead to it.
void type_blocks_from_dwarf(const Image& image, const SymbolIndex& symbols, const HeapModel& heap,
                            const BlockIndex& index, const RootSet& roots, const std::vector<std::vector<Frame>>* frames,
                            BlockTypes& types, DwarfTypes& dwarf, const std::vector<bool>* within = nullptr);

// Typing from blocks instead of roots, for the blocks no root reaches (leaks, types/leak_naming.h).
// Each of `blocks` (named by its vtable, its RTTI or a std::function manager) is followed by the DWARF
// layout of its class, when a module defines one; what it leads to is named with certain evidence.
void type_from_symbol_typed_blocks(const Image& image, const HeapModel& heap, const BlockIndex& index,
                                   std::span<const BlockId> blocks, BlockTypes& types, DwarfTypes& dwarf,
                                   const std::vector<bool>* within = nullptr);

// Asks `infer` for the structure each of `blocks` still unnamed holds, in order; names the block "T?"
// (inferred) and follows it as from a root: what it leads to is named inferred too ("Node?"), so that a
// list's later nodes are named by its head without being inferred one by one. Nothing named is renamed.
void type_from_inferred_blocks(const Image& image, const HeapModel& heap, const BlockIndex& index,
                               std::span<const BlockId> blocks,
                               const std::function<std::optional<DwarfTypeRef>(BlockId)>& infer, BlockTypes& types,
                               DwarfTypes& dwarf, const std::vector<bool>* within = nullptr);

// The field at `offset` of a block of type `ref` (an array of it when the block holds several):
// ".clients", "[17]", "[2].next", or "" when the layout says nothing there.
std::string field_at(const DwarfTypes& dwarf, DwarfTypeRef ref, std::uint64_t offset);

// The member of module `module`'s global variable that holds the word at `address` (".clients",
// ".table[3].next"); empty when no variable DWARF knows covers it, or the word is the whole variable.
std::string variable_field(const Image& image, const DwarfTypes& dwarf, std::size_t module, Address address);

// The T of libstdc++'s raw storage for a T (__gnu_cxx::__aligned_membuf<T>, __aligned_buffer<T>), when it
// is a structure this module defines; kNoDwarfType for any other type.
DwarfTypeId stored_value_type(const DwarfTypeIndex& ix, DwarfTypeId storage);

}  // namespace heapscope
