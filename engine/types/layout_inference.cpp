#include "types/layout_inference.h"

#include <algorithm>
#include <array>
#include <map>
#include <memory>
#include <string_view>
#include <unordered_map>

#include "base/progress.h"
#include "image/memory_cursor.h"

namespace heapscope {

namespace {

constexpr int kMaxNesting = 8;
constexpr std::size_t kMaxSlots = 64;           // members checked per candidate
constexpr std::uint64_t kMaxArrayElements = 16;  // elements of a member array checked
constexpr std::uint64_t kLargestInferred = 1 << 16;  // larger blocks are buffers, not single structures

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

// Structures a library defines for itself: they are the libstdc++ shape namer's business, or too
// generic to tell apart.
bool is_candidate_name(const std::string& name) {
  return !name.empty() && name[0] != '_' && !starts_with(name, "std::") && !starts_with(name, "__gnu_cxx::") &&
         name.find("{lambda") == std::string::npos;
}

// One member that can be checked against the block's bytes.
struct Slot {
  enum class Kind : std::uint8_t { data_pointer, function_pointer, vtable_pointer, string, vector } kind =
      Kind::data_pointer;
  std::uint64_t offset = 0;
  std::uint64_t pointee_size = 0;  // data pointer: the pointee's size when it is a structure, else 0;
                                   // vector: the element's size
  bool library = false;            // inside a library type: its pointers may point into blocks' middles
  DwarfTypeId pointee = kNoDwarfType;  // data pointer: the pointee when it is a structure
  bool pointee_flexible = false;       // data pointer: the pointee ends in a flexible array
};

struct Candidate {
  std::uint16_t module = 0;
  DwarfTypeId type = kNoDwarfType;
  const std::string* name = nullptr;
};

class SlotCollector {
 public:
  explicit SlotCollector(const DwarfTypeIndex& ix) : ix_(ix) {}

  std::vector<Slot> collect(DwarfTypeId type) {
    slots_.clear();
    add(type, 0, false, 0);
    return std::move(slots_);
  }

 private:
  const DwarfTypeIndex& ix_;
  std::vector<Slot> slots_;

  void push(Slot s) {
    if (slots_.size() < kMaxSlots) slots_.push_back(s);
  }

  // The size of the first data pointer's pointee inside `type` (a vector's element), 0 when none.
  std::uint64_t first_pointee_size(DwarfTypeId type, int depth) {
    type = ix_.definition(type);
    if (type == kNoDwarfType || depth > kMaxNesting) return 0;
    const DwarfType& t = ix_.type(type);
    if (t.kind == DwarfType::Kind::pointer) {
      const DwarfTypeId p = ix_.definition(ix_.pointee(type));
      return p == kNoDwarfType ? 0 : ix_.type(p).size;
    }
    if (t.kind != DwarfType::Kind::structure) return 0;
    for (const DwarfTypeMember& m : ix_.members(type))
      if (const std::uint64_t size = first_pointee_size(m.type, depth + 1)) return size;
    return 0;
  }

  void add(DwarfTypeId type, std::uint64_t at, bool library, int depth) {
    type = ix_.definition(type);
    if (type == kNoDwarfType || depth > kMaxNesting) return;
    const DwarfType& t = ix_.type(type);
    if (!t.has_pointers) return;
    switch (t.kind) {
      case DwarfType::Kind::structure: {
        if (starts_with(t.name, "std::__cxx11::basic_string<char,")) {
          push({Slot::Kind::string, at, 0, true, kNoDwarfType, false});
          return;
        }
        if (starts_with(t.name, "std::vector<")) {
          push({Slot::Kind::vector, at, first_pointee_size(type, 0), true, kNoDwarfType, false});
          return;
        }
        const bool in_library = library || starts_with(t.name, "std::") || starts_with(t.name, "__gnu_cxx::");
        for (const DwarfTypeMember& m : ix_.members(type)) {
          if (m.bit_size != 0) continue;
          // A polymorphic class's hidden first member: it points to a vtable, in a module's read-only data.
          if (m.name.rfind("_vptr", 0) == 0)
            push({Slot::Kind::vtable_pointer, at + m.offset, 0, in_library, kNoDwarfType, false});
          else
            add(m.type, at + m.offset, in_library, depth + 1);
        }
        return;
      }
      case DwarfType::Kind::array: {
        const DwarfTypeId element = ix_.definition(t.target);
        const std::uint64_t size = element == kNoDwarfType ? 0 : ix_.type(element).size;
        for (std::uint64_t i = 0; size && i < std::min(t.count, kMaxArrayElements); ++i)
          add(t.target, at + i * size, library, depth + 1);
        return;
      }
      case DwarfType::Kind::pointer: {
        const DwarfTypeId pointee = ix_.definition(ix_.pointee(type));
        if (pointee != kNoDwarfType && ix_.type(pointee).kind == DwarfType::Kind::function) {
          push({Slot::Kind::function_pointer, at, 0, library, kNoDwarfType, false});
          return;
        }
        const bool structure = pointee != kNoDwarfType && ix_.type(pointee).kind == DwarfType::Kind::structure &&
                               !ix_.type(pointee).declaration;
        push({Slot::Kind::data_pointer, at, structure ? ix_.type(pointee).size : 0, library,
              structure ? pointee : kNoDwarfType, structure && ix_.type(pointee).flexible});
        return;
      }
      default:
        return;
    }
  }
};

enum class Check { rejects, neutral, supports };

class LayoutChecker {
 public:
  LayoutChecker(const Image& image, const HeapModel& heap, const BlockIndex& index,
                const std::vector<const DwarfTypeIndex*>& indexes)
      : image_(image), heap_(heap), index_(index), indexes_(indexes), mem_(image) {}

  // The members of module `module`'s structure `type` that can be checked, computed once.
  const std::vector<Slot>& slots(std::uint16_t module, DwarfTypeId type) {
    auto [it, fresh] = slots_.try_emplace((std::uint64_t{module} << 32) | type);
    if (fresh) it->second = SlotCollector(*indexes_[module]).collect(type);
    return it->second;
  }

  // Evidence for a candidate of module `module` (members that check out positively), or -1 when a
  // member rules it out. A pointer to a structure is followed one step: the block it points to must not
  // rule out the pointee's own layout (a list's `next` leads to another node of the list).
  int evidence(const Block& block, std::uint16_t module, const std::vector<Slot>& checked, bool follow = true) {
    int found = 0;
    for (const Slot& s : checked) {
      Check c = check(block, s);
      if (c == Check::supports && follow && s.pointee != kNoDwarfType) {
        const BlockId target = index_.find(*mem_.u64(block.address() + s.offset));
        if (evidence(heap_.blocks[target], module, slots(module, s.pointee), false) < 0) c = Check::rejects;
      }
      if (c == Check::rejects) return -1;
      if (c == Check::supports) ++found;
    }
    return found;
  }

  // Where `block`'s members of `checked` that point to a structure lead: fn(block id, the structure's
  // name) for each that points to an allocated block's start.
  template <typename Fn>
  void for_each_pointee(const Block& block, std::uint16_t module, const std::vector<Slot>& checked, Fn&& fn) {
    for (const Slot& s : checked) {
      if (s.kind != Slot::Kind::data_pointer || s.pointee == kNoDwarfType) continue;
      const auto value = mem_.u64(block.address() + s.offset);
      if (!value || *value == 0) continue;
      if (const BlockId target = index_.starting_at(*value); target != kNoBlock)
        fn(target, indexes_[module]->type(s.pointee).name);
    }
  }

 private:
  const Image& image_;
  const HeapModel& heap_;
  const BlockIndex& index_;
  const std::vector<const DwarfTypeIndex*>& indexes_;  // by module; null without DWARF
  MemoryCursor mem_;
  std::unordered_map<std::uint64_t, std::vector<Slot>> slots_;

  // The allocated block starting exactly at `value`, or null.
  const Block* block_at(Address value) const {
    const BlockId b = index_.starting_at(value);
    return b != kNoBlock ? &heap_.blocks[b] : nullptr;
  }

  Check check(const Block& block, const Slot& s) {
    const Address at = block.address() + s.offset;
    switch (s.kind) {
      case Slot::Kind::data_pointer: return data_pointer(block, s, at);
      case Slot::Kind::function_pointer: return function_pointer(at);
      case Slot::Kind::string: return string(at);
      case Slot::Kind::vector: return vector(s, at);
      case Slot::Kind::vtable_pointer: return vtable_pointer(at);
    }
    return Check::rejects;
  }

  Check data_pointer(const Block& block, const Slot& s, Address at) {
    const auto value = mem_.u64(at);
    if (!value) return Check::rejects;
    if (*value == 0) return Check::neutral;
    if (*value >= block.address() && *value < block.user_end()) return Check::neutral;  // into itself
    if (const BlockId b = index_.find(*value); b != kNoBlock) {
      const Block& target = heap_.blocks[b];
      if (target.address() != *value) return s.library ? Check::neutral : Check::rejects;
      if (s.pointee_size == 0) return Check::neutral;
      if (s.pointee_size > target.usable_size()) return Check::rejects;
      if (s.pointee_flexible) return Check::supports;  // its elements fill the rest of the block
      const auto [lo, hi] = fitting_sizes(target);
      return s.pointee_size >= lo && s.pointee_size <= hi ? Check::supports : Check::neutral;
    }
    // Outside every allocated block: a module's data or a stack may hold the pointee; free heap memory
    // and unmapped addresses may not.
    const MemoryRegion* region = image_.region_at(*value);
    if (!region || !region->readable) return Check::rejects;
    if (s.pointee_size != 0 && !image_.module_at(*value) && heap_contains(*value)) return Check::rejects;
    return Check::neutral;
  }

  bool heap_contains(Address a) const {
    for (const ArenaInfo& arena : heap_.arenas)
      for (const HeapSegment& seg : arena.heaps)
        if (a >= seg.start && a < seg.end) return true;
    return false;
  }

  Check vtable_pointer(Address at) {
    const auto value = mem_.u64(at);
    const MemoryRegion* region = value ? image_.region_at(*value) : nullptr;
    return region && !region->writable && image_.module_at(*value) ? Check::supports : Check::rejects;
  }

  Check function_pointer(Address at) {
    const auto value = mem_.u64(at);
    if (!value) return Check::rejects;
    if (*value == 0) return Check::neutral;
    const MemoryRegion* region = image_.region_at(*value);
    return region && region->executable && image_.module_at(*value) ? Check::supports : Check::rejects;
  }

  // libstdc++'s std::string: pointer, length, then capacity or the 16-byte SSO buffer the pointer points
  // to; the character at [length] is NUL.
  Check string(Address at) {
    const auto p = mem_.u64(at), length = mem_.u64(at + 8), capacity = mem_.u64(at + 16);
    if (!p || !length || !capacity) return Check::rejects;
    std::uint64_t room = 0;
    if (*p == at + 16) {
      room = 15;
    } else if (const Block* body = block_at(*p)) {
      if (*capacity < 16 || *capacity + 1 > body->usable_size()) return Check::rejects;
      room = *capacity;
    } else {
      return Check::rejects;
    }
    if (*length > room) return Check::rejects;
    std::uint8_t terminator = 1;
    if (!image_.read_exact(*p + *length, &terminator, 1) || terminator != 0) return Check::rejects;
    return Check::supports;
  }

  // libstdc++'s std::vector: begin, end, end of storage; all null, or one body holding them in order.
  Check vector(const Slot& s, Address at) {
    const auto begin = mem_.u64(at), end = mem_.u64(at + 8), capacity = mem_.u64(at + 16);
    if (!begin || !end || !capacity) return Check::rejects;
    if (*begin == 0) return *end == 0 && *capacity == 0 ? Check::neutral : Check::rejects;
    const Block* body = block_at(*begin);
    if (!body || *end < *begin || *capacity < *end || *capacity - *begin > body->usable_size() ||
        *capacity == *begin)
      return Check::rejects;
    if (s.pointee_size && ((*end - *begin) % s.pointee_size || (*capacity - *begin) % s.pointee_size))
      return Check::rejects;
    return Check::supports;
  }
};

}  // namespace

std::pair<std::uint64_t, std::uint64_t> fitting_sizes(const Block& block) {
  const std::uint64_t usable = block.usable_size();
  if (block.is_bare()) {
    // tcmalloc's size classes are at most an eighth apart (and 8 bytes apart below 128).
    const std::uint64_t slack = std::max<std::uint64_t>(8, usable / 8);
    return {usable > slack ? usable - slack + 1 : 1, usable};
  }
  if (block.is_inband()) {
    // musl's mallocng: slot sizes a quarter or less apart, and the object may start some units into its slot.
    const std::uint64_t slack = std::max<std::uint64_t>(16, usable * 3 / 8);
    return {usable > slack ? usable - slack + 1 : 1, usable};
  }
  // glibc: a request of n bytes gets a chunk of max(32, n + 8 rounded up to 16), usable 8 bytes less.
  constexpr std::uint64_t kSmallestUsable = 24, kAlignment = 16;
  if (usable <= kSmallestUsable) return {1, usable};
  return {usable - kAlignment + 1, usable};
}

struct LayoutInference::State {
  State(const Image& image, const HeapModel& heap_model, const BlockIndex& index, const DwarfTypes& dwarf_types)
      : heap(heap_model), dwarf(dwarf_types),
        indexes(std::min<std::size_t>(image.modules().size(), DwarfTypeRef::kNoModule), nullptr),
        loaded(indexes.size(), false), checker(image, heap_model, index, indexes) {
    const Module* main = image.main_executable();
    main_module = static_cast<std::uint16_t>(main ? main - image.modules().data() : DwarfTypeRef::kNoModule);
    for (std::size_t m = 0; m < indexes.size(); ++m) internal.push_back(is_runtime_internal(image.modules()[m]));
  }

  // The C library's, the dynamic linker's and the allocators' structures describe their own bookkeeping
  // (malloc_chunk, list_head, nameserver_list, a collector's headers): never what a program leaked, though
  // their layouts fit small blocks of pointers well.
  static bool is_runtime_internal(const Module& module) {
    constexpr std::string_view kPrefixes[] = {"libc.so", "libc-", "ld-linux", "ld-musl", "libc.musl", "libpthread",
                                              "libjemalloc", "libtcmalloc", "libmimalloc", "libgc.so", "libgc-"};
    const std::string_view path = module.path;
    const std::string_view name = path.substr(path.rfind('/') == std::string_view::npos ? 0 : path.rfind('/') + 1);
    return std::any_of(std::begin(kPrefixes), std::end(kPrefixes), [&](std::string_view p) { return starts_with(name, p); });
  }

  const HeapModel& heap;
  const DwarfTypes& dwarf;
  // By module, read on first use: the libraries' DWARF (glibc's, with libc6-dbg, is large) only when the
  // program's own types leave a block unnamed.
  std::vector<const DwarfTypeIndex*> indexes;
  std::vector<bool> loaded;
  LayoutChecker checker;
  std::uint16_t main_module = DwarfTypeRef::kNoModule;
  std::vector<bool> internal;  // by module: is_runtime_internal, whose structures are never candidates
  // Candidates per fitting size range, the program's own [0] and the libraries' [1], gathered once: many
  // leaked blocks share a size.
  std::map<std::pair<std::uint64_t, std::uint64_t>, std::array<std::optional<std::vector<Candidate>>, 2>> by_range;

  const DwarfTypeIndex* index(std::size_t m) {
    if (!loaded[m]) {
      indexes[m] = dwarf.index(m);
      loaded[m] = true;
    }
    return indexes[m];
  }

  bool candidate(std::uint16_t module, DwarfTypeId id) {
    const DwarfType& t = indexes[module]->type(id);
    return t.kind == DwarfType::Kind::structure && !t.declaration && t.has_pointers && is_candidate_name(t.name) &&
           !checker.slots(module, id).empty();
  }

  void add_candidates(std::size_t m, std::pair<std::uint64_t, std::uint64_t> range, std::vector<Candidate>& out) {
    const DwarfTypeIndex* ix = index(m);
    if (!ix) return;
    const auto module = static_cast<std::uint16_t>(m);
    for (const DwarfTypeId id : ix->structures_sized(range.first, range.second))
      if (candidate(module, id)) out.push_back({module, id, &ix->type(id).name});
    // A structure ending in a flexible array was allocated for its elements too: any larger block fits.
    for (const DwarfTypeId id : ix->structures_sized(1, range.first - 1))
      if (ix->type(id).flexible && candidate(module, id)) out.push_back({module, id, &ix->type(id).name});
  }

  // `libraries`: the structures of every module but the main executable; otherwise the main executable's.
  const std::vector<Candidate>& candidates(const Block& block, bool libraries) {
    const auto range = fitting_sizes(block);
    std::optional<std::vector<Candidate>>& slot = by_range[range][libraries ? 1 : 0];
    if (slot) return *slot;
    slot.emplace();
    for (std::size_t m = 0; m < indexes.size(); ++m)
      if ((m == main_module) != libraries && !internal[m]) add_candidates(m, range, *slot);
    return *slot;
  }

  // The candidates with the most evidence (one per name: the same structure defined by two units is one),
  // and that evidence.
  std::pair<std::vector<const Candidate*>, int> best_of(const Block& block, const std::vector<Candidate>& all) {
    std::vector<const Candidate*> best;
    int best_evidence = 0;
    for (const Candidate& c : all) {
      const int e = checker.evidence(block, c.module, checker.slots(c.module, c.type));
      if (e <= 0 || e < best_evidence) continue;
      if (e > best_evidence) best.clear();
      best_evidence = e;
      if (std::none_of(best.begin(), best.end(), [&](const Candidate* o) { return *o->name == *c.name; }))
        best.push_back(&c);
    }
    return {std::move(best), best_evidence};
  }

  // Of structures tied at `block`, the one whose members' pointees carry the certain names its members'
  // types have (one point each; a pointee certainly named otherwise takes one), when one leads; null
  // otherwise.
  const Candidate* break_tie(const Block& block, const std::vector<const Candidate*>& tied) {
    const Candidate* leader = nullptr;
    int lead = 0;
    bool shared = false;
    for (const Candidate* c : tied) {
      int score = 0;
      checker.for_each_pointee(block, c->module, checker.slots(c->module, c->type),
                               [&](BlockId target, const std::string& name) {
                                 if (const auto it = known.find(target); it != known.end())
                                   score += it->second == name ? 1 : -1;
                               });
      if (score > lead) {
        leader = c;
        lead = score;
        shared = false;
      } else if (score == lead && score > 0) {
        shared = true;
      }
    }
    return shared ? nullptr : leader;
  }

  std::unordered_map<BlockId, std::vector<const Candidate*>> ties;  // blocks the program's structures tie at
  std::unordered_map<BlockId, std::string> known;                   // certain names of blocks ties point to
};

LayoutInference::LayoutInference(const Image& image, const HeapModel& heap, const BlockIndex& index,
                                 const DwarfTypes& dwarf)
    : state_(std::make_unique<State>(image, heap, index, dwarf)) {}

LayoutInference::~LayoutInference() = default;

std::vector<BlockId> LayoutInference::tie_pointees(BlockId b) {
  std::vector<BlockId> out;
  const auto tied = state_->ties.find(b);
  if (tied == state_->ties.end()) return out;
  const Block& block = state_->heap.blocks[b];
  for (const Candidate* c : tied->second)
    state_->checker.for_each_pointee(block, c->module, state_->checker.slots(c->module, c->type),
                                     [&](BlockId target, const std::string&) { out.push_back(target); });
  return out;
}

std::vector<BlockId> LayoutInference::tied_blocks() const {
  std::vector<BlockId> out;
  for (const auto& [b, tied] : state_->ties) out.push_back(b);
  std::sort(out.begin(), out.end());
  return out;
}

void LayoutInference::know_names(std::unordered_map<BlockId, std::string> names) {
  state_->known = std::move(names);
  state_->ties.clear();
}

std::optional<DwarfTypeRef> LayoutInference::infer(BlockId b) {
  const Block& block = state_->heap.blocks[b];
  if (!is_allocated(block.state) || block.usable_size() > kLargestInferred) return std::nullopt;
  // The program's own structures first: a leak is most often of the program's own types, and a library's
  // internal structure (glibc's regex tree node starts with a pointer to its own type, as a list node
  // does) must not outvote them. A tie among them names nothing.
  const auto [own, own_evidence] = state_->best_of(block, state_->candidates(block, /*libraries=*/false));
  if (own.size() == 1) return DwarfTypeRef{own.front()->module, own.front()->type};
  if (!own.empty()) {
    if (const Candidate* c = state_->break_tie(block, own)) return DwarfTypeRef{c->module, c->type};
    state_->ties[b] = own;
    return std::nullopt;
  }
  // A library's structure needs two members of evidence: its internal lists and flexible-array headers fit
  // any block that starts with one pointer to a block of the right size.
  constexpr int kLibraryEvidence = 2;
  const auto [library, evidence] = state_->best_of(block, state_->candidates(block, /*libraries=*/true));
  if (library.size() != 1 || evidence < kLibraryEvidence) return std::nullopt;
  return DwarfTypeRef{library.front()->module, library.front()->type};
}

}  // namespace heapscope
