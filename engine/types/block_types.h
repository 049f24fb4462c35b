// Types of heap blocks from symbols (DWARF typing of every block comes later): a C++ object's vtable pointer
// at offset 0 names its dynamic type (by the vtable's symbol, or on a stripped binary by the RTTI the vtable
// points to); a functor stored by std::function is named by its libstdc++ manager
// function, found next to the pointer to it, and DWARF adds where the functor (a lambda) was written;
// coroutine frames by their resume/destroy clones. Everything else is "unknown (N bytes)".
#pragma once

#include <string>
#include <vector>

#include "model/block_index.h"
#include "model/roots.h"
#include "heap/heap_model.h"
#include "symbols/symbol_index.h"
#include "types/coroutine_frames.h"

namespace heapscope {

class BlockTypes {
 public:
  static constexpr std::uint32_t kUnknown = 0;

  BlockTypes() : names_{""}, sources_{""} {}
  std::uint32_t type_id(std::size_t block) const { return block < ids_.size() ? ids_[block] : kUnknown; }
  // The type's name, or "unknown (N bytes)" for untyped blocks.
  std::string name(std::size_t block, const Block& b) const;
  std::uint32_t intern(const std::string& name);
  std::size_t type_count() const { return names_.size(); }  // ids are below this
  void rename(std::uint32_t id, std::string name);
  // Where the type was declared ("client.h:12"), when DWARF says; empty otherwise.
  const std::string& source_of(std::uint32_t id) const { return sources_[id < sources_.size() ? id : 0]; }
  void set_source(std::uint32_t id, std::string source);
  void set(std::size_t block, std::uint32_t id) { ids_[block] = id; }
  void resize(std::size_t blocks) { ids_.assign(blocks, kUnknown); }
  std::size_t typed_blocks() const;

 private:
  std::vector<std::uint32_t> ids_;
  std::vector<std::string> names_;
  std::vector<std::string> sources_;  // by type id, like names_
};

// With `within` (a flag per block, closed under predecessors: graph_closure.h's ancestors_of), only the
// blocks in it are typed, and only they and the roots are read: the names they get are the same as over
// the whole heap.
BlockTypes infer_types(const Image& image, const SymbolIndex& symbols, const HeapModel& heap, const BlockIndex& index,
                       const RootSet& roots, const std::vector<bool>* within = nullptr);

// Types each coroutine frame "coroutine frame <function>".
void type_coroutine_frames(BlockTypes& types, const CoroutineFrames& coroutines);

// "std::_Function_base::_Base_manager<main::{lambda()#1}>::_M_manager(...)" → "main::{lambda()#1}"; empty when
// the name is not a std::function manager.
std::string functor_type_from_manager(const std::string& demangled);

}  // namespace heapscope
