#include "runtime/cpython/cpython_objects.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "base/progress.h"
#include "runtime/cpython/cpython_layout.h"
#include "runtime/cpython/cpython_tracemalloc.h"

namespace heapscope {

namespace {

using cpython::kTpBase, cpython::kTpBasicsize, cpython::kTpFlags, cpython::kTpItemsize, cpython::kTpName;
constexpr Address kObSize = 16;  // a variable-size object's item count, after ob_refcnt and ob_type
// A weak reference (PyWeakReference: wr_object, wr_callback, hash, wr_prev, wr_next after its header): the
// words that are no references, from the object's start.
constexpr std::uint64_t kWeakReferenceWords = (1u << 2) | (1u << 5) | (1u << 6);
// A str's length, hash and state (a 4-byte bit field whose padding keeps a reused slot's bytes): numbers.
constexpr std::uint64_t kStrNumberWords = (1u << 2) | (1u << 3) | (1u << 4);
bool is_weakref_type_name(std::string_view name) {
  for (const char* n : {"weakref", "weakref.ReferenceType", "weakproxy", "weakref.ProxyType", "weakcallableproxy",
                        "weakref.CallableProxyType"})
    if (name == n) return true;
  return false;
}
constexpr std::uint64_t kHaveGc = 1ull << 14;         // Py_TPFLAGS_HAVE_GC
constexpr std::uint64_t kManagedDict = 1ull << 4;     // Py_TPFLAGS_MANAGED_DICT (3.11)
constexpr std::uint64_t kManagedWeakref = 1ull << 3;  // Py_TPFLAGS_MANAGED_WEAKREF (3.12)

constexpr std::uint32_t kGcHeadBytes = 16;          // _gc_next, _gc_prev
constexpr std::uint32_t kPreHeaderBytes = 16;       // the instance's dict and values (3.11) before the PyGC_Head
constexpr std::uint64_t kPrevFlags = 3;             // _gc_prev's low bits: COLLECTING, FINALIZED
constexpr std::uint64_t kMaxRefcount = 1ull << 40;  // far above any real count; rules out text and pointers
constexpr std::uint32_t kMaxValuesPrefix = 64;      // a PyDictValues prefix: round_up(slots + 2, 8) bytes
constexpr Address kLowestAddress = 4096, kHighestAddress = (Address{1} << 47) - 1;  // x86-64 user space

// What differs between releases, for the objects' headers: which types' instances carry two more words
// before their PyGC_Head, and whether a split dict's values array has a prefix whose last byte is its size.
struct Release {
  int minor = 0;
  std::uint64_t preheader_flags = 0;
  bool values_prefix = false;
};

Release release_table(int minor) {
  if (minor <= 10) return {minor, 0, false};
  if (minor == 11) return {minor, kManagedDict, true};
  return {minor, kManagedDict | kManagedWeakref, true};  // 3.12; later releases are read as 3.12
}

// The release, from the interpreter's Py_Version (exported since 3.11) or else its file name.
struct Interpreter {
  Release release;
  std::string version_from;
  const Module* module = nullptr;
};

std::optional<Interpreter> find_interpreter(const Image& image, const SymbolIndex& symbols) {
  const Module* m = cpython::interpreter_module(image, symbols);
  const std::optional<cpython::InterpreterRelease> r = m ? cpython::interpreter_release(image, symbols, *m) : std::nullopt;
  if (!r) return std::nullopt;
  return Interpreter{release_table(r->minor), std::string(r->from), m};
}

// The builtin containers whose items live in a malloc'ed block of their own, found from the object's
// field that points to its start: a list's ob_item, a dict's ma_keys, a set's table (unless it is the
// set's own small table). The offsets are those of every 64-bit release since 3.8.
struct ContainerBody {
  std::string_view type;
  Address field;
  std::string_view body;
};
constexpr ContainerBody kContainerBodies[] = {
    {"list", 24, "list items"}, {"dict", 32, "dict keys"}, {"set", 40, "set table"}, {"frozenset", 40, "set table"}};

const ContainerBody* container_body(std::string_view type_name) {
  for (const ContainerBody& c : kContainerBodies)
    if (c.type == type_name) return &c;
  return nullptr;
}

// What a type object tells: whether it is one (its type's type is PyType_Type, the one object that is its
// own type; a metaclass's type is PyType_Type too), its flags, instance size and name. Cached: a heap has
// few types.
struct TypeFacts {
  bool is_type = false;
  std::uint64_t flags = 0;
  std::uint64_t basicsize = 0;
  std::uint64_t itemsize = 0;  // a variable-size type's bytes per item (a tuple's 8), 0 otherwise
  std::uint32_t name = 0;  // index into ObjectHeaders::type_names
  const ContainerBody* body = nullptr;  // where a builtin container keeps its items, when it is one
  bool is_str = false;
};

class Types {
 public:
  Types(const Image& image, std::vector<std::string>& names) : image_(image), names_(names) {}

  // Most words asked about are no type (a str's hash, a length): those are ruled out by their value or
  // by the memory they would point to, and only types are kept, so that a heap of millions of objects
  // keeps a few hundred entries.
  const TypeFacts& of(Address type) {
    static const TypeFacts kNone;
    if (type % 8 || type < kLowestAddress || type > kHighestAddress) return kNone;
    if (const auto it = known_.find(type); it != known_.end()) return it->second;
    TypeFacts facts = read(type);
    if (!facts.is_type) return kNone;
    return known_.emplace(type, facts).first->second;
  }

  std::uint32_t intern(const std::string& name) {
    const auto [it, fresh] = name_ids_.try_emplace(name, static_cast<std::uint32_t>(names_.size()));
    if (fresh) names_.push_back(name);
    return it->second;
  }

 private:
  bool is_type_type(Address t) const {
    const auto own = image_.read_u64(t + 8);
    return own && *own == t;
  }

  bool is_type(Address type) const {
    if (type == 0 || type % 8) return false;
    const auto meta = image_.read_u64(type + 8);
    if (!meta || *meta == 0 || *meta % 8) return false;
    if (is_type_type(*meta)) return true;
    const auto meta_type = image_.read_u64(*meta + 8);
    return meta_type && is_type_type(*meta_type);
  }

  TypeFacts read(Address type) {
    TypeFacts t;
    if (!is_type(type)) return t;
    const auto flags = image_.read_u64(type + kTpFlags);
    const auto basicsize = image_.read_u64(type + kTpBasicsize);
    const auto name_at = image_.read_u64(type + kTpName);
    if (!flags || !basicsize || *basicsize == 0 || *basicsize > (1u << 20)) return t;
    t.is_type = true;
    t.flags = *flags;
    t.basicsize = *basicsize;
    // A type's name is text the interpreter printed from source (an identifier, dotted): anything else
    // means this was no type object after all.
    const std::optional<std::string> name = name_at ? image_.read_c_string(*name_at, 256) : std::nullopt;
    if (!name || name->empty() || !std::all_of(name->begin(), name->end(), [](char c) { return c > ' ' && c < 0x7f; }))
      return TypeFacts{};
    t.name = intern(*name);
    t.body = container_body(*name);
    t.is_str = *name == "str";
    if (is_weak_reference(type)) weak_names_.insert(t.name);
    if (const auto itemsize = image_.read_u64(type + kTpItemsize); itemsize && *itemsize <= 64) t.itemsize = *itemsize;
    return t;
  }

  const Image& image_;
  std::vector<std::string>& names_;
  std::unordered_map<Address, TypeFacts> known_;
  std::unordered_map<std::string, std::uint32_t> name_ids_;
  std::unordered_set<std::uint32_t> weak_names_;

  // Whether `type` is a weak reference's (weakref.ref, its proxies, or a class deriving from one).
  bool is_weak_reference(Address type) const {
    constexpr int kMaxBases = 16;
    for (int depth = 0; type && depth < kMaxBases; ++depth) {
      const auto name_at = image_.read_u64(type + kTpName);
      const std::optional<std::string> name = name_at ? image_.read_c_string(*name_at, 32) : std::nullopt;
      if (name && is_weakref_type_name(*name)) return true;
      const auto base = image_.read_u64(type + kTpBase);
      type = base ? *base : 0;
    }
    return false;
  }

 public:
  // The weak reference types' names: their objects' referent and list links are no references.
  const std::unordered_set<std::uint32_t>& weak_names() const { return weak_names_; }
};

// The header's links agree with their neighbours': next's prev and prev's next are this header.
bool on_consistent_list(const Image& image, Address head, std::uint64_t next, std::uint64_t prev) {
  if (next == 0 && prev == 0) return true;  // untracked (e.g. a tuple of atoms)
  if (next == 0 || prev == 0) return false;
  const auto next_prev = image.read_u64(next + 8);
  const auto prev_next = image.read_u64(prev);
  return next_prev && prev_next && (*next_prev & ~kPrevFlags) == head && *prev_next == head;
}

bool plausible_refcount(std::uint64_t refcount) { return refcount != 0 && refcount <= kMaxRefcount; }

// The builtin types whose objects (never GC-tracked) hold no pointers past their header: how many bytes
// of one the scan reads, 0 for a type not among them. A str keeps pointers in its header alone (3.11's wstr,
// a non-ASCII str's utf8 copy, a legacy str's data: within its first 80 bytes in every release; each str's
// own header, by its form, is its object_end_words: str_header); the others none past their type.
std::uint32_t pointer_free_body_prefix(std::string_view type_name, int minor) {
  constexpr std::uint32_t kStrHeader = 80, kObjectHeader = 16;
  if (type_name == "str") return kStrHeader;
  // From 3.11 a code object ends with its bytecode, whose inline caches keep borrowed pointers (a method
  // LOAD_ATTR found, guarded by its type's version): its fields alone hold references (co_code_adaptive's
  // offset, from each release's headers).
  if (type_name == "code") return static_cast<std::uint32_t>(cpython::code_instructions_offset(minor));
  for (const char* name : {"bytes", "int", "float", "complex", "bool"})
    if (type_name == name) return kObjectHeader;
  return 0;
}

std::uint64_t round_up8(std::uint64_t n) { return (n + 7) / 8 * 8; }

// The object a block holds, if any: where it starts (0 for an object without a header), whether a
// PyGC_Head's links sit right before it, and its type.
struct Found {
  std::uint32_t offset = 0;
  bool links = false;
  const TypeFacts* facts = nullptr;
  std::uint64_t end = 0;  // where the object ends, from the block's start; 0 when unknown
};

class ObjectFinder {
 public:
  ObjectFinder(const Image& image, Release release, Types& types) : image_(image), release_(release), types_(types) {}

  std::optional<Found> find(const Block& block) {
    constexpr std::size_t kWords = 6;
    const std::uint64_t usable = block.usable_size();
    if (usable < 16) return std::nullopt;
    std::uint64_t w[kWords] = {};
    const std::size_t got = image_.read(block.address(), w, std::min<std::uint64_t>(usable, sizeof w)) / 8;
    // A GC-tracked object past its PyGC_Head, then one past the two words of a class that manages its
    // instances' dicts, then an object without a header.
    if (got >= 4)
      if (auto f = gc_object(block, w[0], w[1], w[2], w[3], kGcHeadBytes)) return f;
    if (got >= 6 && release_.preheader_flags)
      if (auto f = gc_object(block, w[2], w[3], w[4], w[5], kPreHeaderBytes + kGcHeadBytes);
          f && (f->facts->flags & release_.preheader_flags))
        return f;
    if (got >= 2 && plausible_refcount(w[0])) {
      const TypeFacts& t = types_.of(w[1]);
      // No size check here: a compact str is smaller than str's tp_basicsize.
      if (t.is_type && !(t.flags & kHaveGc)) {
        Found f{0, false, &t, 0};
        if (t.is_str && got > cpython::kStrState / 8) f.end = cpython::str_header(release_.minor, static_cast<std::uint32_t>(w[cpython::kStrState / 8]));
        return f;
      }
    }
    return std::nullopt;
  }

  // Where a GC-tracked object at `offset` ends: its type's size, and its items' for a variable-size type.
  std::uint64_t end_of(const Block& block, std::uint32_t offset, const TypeFacts& t) const {
    std::uint64_t items = 0;
    if (t.itemsize) {
      const auto size = image_.read_u64(block.address() + offset + kObSize);
      if (!size) return 0;
      const auto count = static_cast<std::int64_t>(*size);
      items = t.itemsize * static_cast<std::uint64_t>(count < 0 ? -count : count);
    }
    // 3.13 keeps an instance's attribute values inline past its basic size (Py_TPFLAGS_INLINE_VALUES).
    constexpr std::uint64_t kInlineValues = 1ull << 2;
    if (release_.minor >= 13 && (t.flags & kInlineValues)) return 0;
    const std::uint64_t end = round_up8(offset + t.basicsize + items);
    return end <= block.usable_size() ? end : 0;
  }

 private:
  std::optional<Found> gc_object(const Block& block, std::uint64_t next, std::uint64_t prev, std::uint64_t refcount,
                                 Address type, std::uint32_t offset) {
    if (!plausible_refcount(refcount)) return std::nullopt;
    const TypeFacts& t = types_.of(type);
    if (!t.is_type || !(t.flags & kHaveGc) || offset + t.basicsize > block.usable_size()) return std::nullopt;
    const Address head = block.address() + offset - kGcHeadBytes;
    if (!on_consistent_list(image_, head, next, prev & ~kPrevFlags)) return std::nullopt;
    return Found{offset, true, &t, end_of(block, offset, t)};
  }

  const Image& image_;
  Release release_;
  Types& types_;
};

// The allocated block whose user bytes hold `addr`.
std::optional<std::size_t> block_holding(const HeapModel& heap, Address addr) {
  const Block* b = heap.block_containing(addr);
  if (!b || !is_allocated(b->state) || addr < b->address() || addr >= b->address() + b->usable_size()) return std::nullopt;
  return static_cast<std::size_t>(b - &heap.blocks[0]);
}

// A dict keys' entries: where they start in the block (past its header and index: 40 bytes and dk_size
// slots of 1-8 bytes to 3.10; 32 bytes and 2^dk_log2_index_bytes from 3.11), each one's size (hash, key,
// value: 24 bytes; from 3.11 a table of str keys keeps no hash: 16), and where its key lies.
struct KeysEntries {
  std::uint64_t start = 0, size = 0, key = 0;
};

std::optional<KeysEntries> keys_entries(const Image& image, Address keys, int minor) {
  if (minor <= 10) {
    const auto size = image.read_u64(keys + 8);
    if (!size || *size == 0 || *size > (std::uint64_t{1} << 32)) return std::nullopt;
    const std::uint64_t slot = *size <= 0xff ? 1 : *size <= 0xffff ? 2 : 4;
    return KeysEntries{40 + *size * slot, 24, 8};
  }
  std::uint8_t sizes[3] = {};
  if (!image.read_exact(keys + 8, sizes, sizeof sizes) || sizes[1] > 40) return std::nullopt;
  const bool general = sizes[2] == 0;
  return KeysEntries{32 + (std::uint64_t{1} << sizes[1]), general ? 24u : 16u, general ? 8u : 0u};
}

// The text of entry `entry`'s key in the dict keys at `keys` (laid out as `e` says), when it is short text.
std::optional<std::string> key_text(const Image& image, Address keys, const KeysEntries& e, std::uint64_t entry, int minor) {
  constexpr std::uint64_t kLongestKey = 80;
  const auto key = image.read_u64(keys + e.start + entry * e.size + e.key);
  return key ? cpython::ascii_text(image, *key, minor, kLongestKey) : std::nullopt;
}

// How many bytes of its items' block a container uses (its spare room keeps what it held before): a list
// its ob_size items; a dict's keys, laid out as `e` says, up to its dk_nentries entries (dk_nentries at 32
// to 3.10, at 24 from 3.11). 0 when it cannot tell.
std::uint64_t list_used_bytes(const Image& image, Address list) {
  const auto size = image.read_u64(list + kObSize);
  return size && *size < (std::uint64_t{1} << 40) ? *size * 8 : 0;
}

std::uint64_t keys_used_bytes(const Image& image, Address keys, const KeysEntries& e, int minor) {
  const auto nentries = image.read_u64(keys + (minor <= 10 ? 32 : 24));
  if (!nentries || *nentries > (std::uint64_t{1} << 32)) return 0;
  return round_up8(e.start + *nentries * e.size);
}

class Marker {
 public:
  Marker(ObjectHeaders& out, std::size_t blocks) : out_(out), starts_(blocks, 0), type_of_(blocks, 0) {}

  void object(std::size_t b, const Found& f) {
    type_of_[b] = f.facts->name;
    if (f.offset == 0) return;
    starts_[b] = static_cast<std::uint8_t>(f.offset | (f.links ? ObjectHeaders::kLinksBefore : 0));
    ++out_.count;
  }

  // The block a builtin container's items live in, named after it when it holds no object itself, and
  // how much of it the container uses.
  void body_of(const Image& image, const HeapModel& heap, std::size_t owner, const ContainerBody& c, Types& types,
               int minor) {
    const Address object = heap.blocks[owner].address() + (starts_[owner] & ~ObjectHeaders::kLinksBefore);
    const auto at = image.read_u64(object + c.field);
    if (!at || *at == 0) return;
    const auto b = block_holding(heap, *at);
    if (!b || heap.blocks[*b].address() != *at || type_of_[*b]) return;
    type_of_[*b] = types.intern(std::string(c.body));
    const std::uint64_t room = heap.blocks[*b].usable_size();
    if (c.type == "list") {
      if (const std::uint64_t end = list_used_bytes(image, object); end <= room) ends(*b, end);
      return;
    }
    if (c.type != "dict") return;  // a set's table is sparse by design
    const std::optional<KeysEntries> e = keys_entries(image, *at, minor);
    if (!e) return;
    if (const std::uint64_t end = keys_used_bytes(image, *at, *e, minor); end <= room) ends(*b, end);
    // A dict's hashes are no references (an int key's hash is its value: id()s are addresses).
    constexpr std::uint64_t kHashedEntryBytes = 24;
    if (e->size == kHashedEntryBytes && e->start / 8 <= ObjectHeaders::kMaxEndWords)
      strided_.push_back({static_cast<std::uint32_t>(*b), static_cast<std::uint16_t>(e->start / 8),
                          static_cast<std::uint8_t>(e->size / 8), 0});
  }

  void ends(std::size_t b, std::uint64_t end) {
    const std::uint64_t words = (end + 7) / 8;
    if (words <= ObjectHeaders::kMaxEndWords) end_[b] = static_cast<std::uint16_t>(words);
  }

  // A split dict's values array (3.11, 3.12), pointed to past a prefix whose last byte is the prefix's
  // size: the instance at `owner` points to it, from one of the two words before its PyGC_Head.
  void values_of(const Image& image, const HeapModel& heap, std::size_t owner, Types& types) {
    const Block& o = heap.blocks[owner];
    std::uint64_t words[2] = {};
    if (image.read(o.address(), words, sizeof words) != sizeof words) return;
    // 3.11 keeps the values in the first word; 3.12 in the second, tagged with its low bit.
    for (const Address v : {words[0], words[1] & 1 ? words[1] + 1 : 0}) {
      if (v == 0) continue;
      const auto b = block_holding(heap, v);
      if (!b || starts_[*b] || type_of_[*b]) continue;
      const std::uint64_t prefix = v - heap.blocks[*b].address();
      std::uint8_t last = 0;
      if (prefix == 0 || prefix > kMaxValuesPrefix || prefix % 8 || !image.read_exact(v - 1, &last, 1) ||
          last != prefix)
        continue;
      starts_[*b] = static_cast<std::uint8_t>(prefix);
      type_of_[*b] = types.intern(out_.type_names[type_of_[owner]] + ".__dict__ values");
      ++out_.count;
    }
  }

  // tracemalloc's own blocks, named; the key of each trace's entry (a traced block's address) no reference.
  void tracemalloc(const HeapModel& heap, const cpython::TracemallocBlocks& t, Types& types) {
    const auto name = [&](Address at, std::string_view type) -> std::optional<std::size_t> {
      const auto b = block_holding(heap, at);
      if (!b || heap.blocks[*b].address() != at || starts_[*b] || type_of_[*b]) return std::nullopt;
      type_of_[*b] = types.intern(std::string(type));
      return b;
    };
    // A trace is {size, traceback}; the rest of its block, and of an entry's, is a freed block's words.
    name(t.table, "tracemalloc table");
    name(t.buckets, "tracemalloc table buckets");
    for (const Address at : t.traces)
      if (const auto b = name(at, "tracemalloc trace")) ends(*b, 16);
    for (const Address at : t.tracebacks) name(at, "tracemalloc traceback");
    constexpr std::uint8_t kEntryWords = 4, kKeyWord = 2;  // {next, hash, key, value}
    for (const Address at : t.entries)
      if (const auto b = name(at, kTraceEntry)) strided_.push_back({static_cast<std::uint32_t>(*b), 0, kEntryWords, kKeyWord});
    for (const Address at : t.other_tables) name(at, "hashtable");
    for (const Address at : t.other_entries)
      if (const auto b = name(at, "hashtable entry")) ends(*b, kEntryWords * 8);
  }
  static constexpr std::string_view kTraceEntry = "tracemalloc trace entry";

  // The marks made, into the headers.
  void finish() {
    out_.starts = ViewedArray<std::uint8_t>(std::move(starts_));
    out_.type_of = ViewedArray<std::uint32_t>(std::move(type_of_));
    out_.object_end_words = ViewedArray<std::uint16_t>(std::move(end_));
    std::sort(strided_.begin(), strided_.end(), [](const auto& a, const auto& b) { return a.block < b.block; });
    out_.strided = std::move(strided_);
  }

 private:
  ObjectHeaders& out_;
  std::vector<std::uint8_t> starts_;
  std::vector<std::uint32_t> type_of_;
  std::vector<std::uint16_t> end_ = std::vector<std::uint16_t>(starts_.size(), 0);
  std::vector<ObjectHeaders::StridedBlock> strided_;
};

}  // namespace

std::optional<ObjectHeaders> find_cpython_objects(const Image& image, const SymbolIndex& symbols, const HeapModel& heap) {
  const std::optional<Interpreter> interpreter = find_interpreter(image, symbols);
  if (!interpreter) return std::nullopt;
  const Release release = interpreter->release;
  ObjectHeaders out;
  Types types(image, out.type_names);
  ObjectFinder finder(image, release, types);
  Marker marker(out, heap.blocks.size());
  std::vector<std::size_t> with_preheader;
  std::vector<std::pair<std::size_t, const ContainerBody*>> containers;
  std::uint64_t objects = 0;
  for (std::size_t b = 0; b < heap.blocks.size(); ++b) {
    if ((b & kCheckMask) == 0) progress_check();  // a pass over every block: Ctrl-C answers within it
    const Block& block = heap.blocks[b];
    if (!is_allocated(block.state)) continue;
    const std::optional<Found> f = finder.find(block);
    if (!f) continue;
    marker.object(b, *f);
    marker.ends(b, f->end);
    ++objects;
    if (f->offset > kGcHeadBytes) with_preheader.push_back(b);
    if (f->facts->body) containers.emplace_back(b, f->facts->body);
  }
  for (const auto& [b, c] : containers) marker.body_of(image, heap, b, *c, types, release.minor);
  if (release.values_prefix)
    for (const std::size_t b : with_preheader) marker.values_of(image, heap, b, types);
  if (objects == 0) return std::nullopt;
  if (const ModuleSymbols* syms = symbols.symbols_for(*interpreter->module)) {
    const cpython::TracemallocPlace place =
        cpython::tracemalloc_place(symbols, *interpreter->module, writable_ranges(*interpreter->module, *syms), release.minor);
    if (const std::optional<cpython::TracemallocBlocks> t = cpython::tracemalloc_blocks(image, place))
      marker.tracemalloc(heap, *t, types);
  }
  marker.finish();
  out.scanned_prefix.clear();
  for (const std::string& name : out.type_names) {
    out.scanned_prefix.push_back(pointer_free_body_prefix(name, release.minor));
    out.strided_types.push_back(name == "dict keys" || name == Marker::kTraceEntry);
  }
  out.weak_words.assign(out.type_names.size(), 0);
  for (const std::uint32_t id : types.weak_names()) out.weak_words[id] = kWeakReferenceWords;
  for (std::size_t id = 0; id < out.type_names.size(); ++id)
    if (out.type_names[id] == "str") out.weak_words[id] = kStrNumberWords;
  out.release = static_cast<std::uint32_t>(release.minor);
  out.layout = fmt::format(
      "CPython 3.{} (release from {}; header layout from heapscope's table for 3.{}): a PyGC_Head (16 bytes) "
      "before each GC-tracked object{}{}",
      release.minor, interpreter->version_from, std::min(release.minor, 12),
      release.preheader_flags ? ", two more words before it for classes that manage their instances' dicts" : "",
      release.values_prefix ? ", split dicts' values past a prefix" : "");
  return out;
}

namespace {

// The member of its type (or of a base type) that an object's word at `offset` from its start is, as its
// type describes its instances' fields (tp_members: a __slots__ class's slots, a builtin's members such as
// a function's __globals__): ".x"; empty when none names it.
std::string member_at(const Image& image, Address object, std::uint64_t offset) {
  constexpr Address kMemberBytes = 40, kMemberOffset = 16;  // PyMemberDef: name, type, offset, flags, doc
  constexpr int kMostBases = 16, kMostMembers = 256;
  auto type = image.read_u64(object + cpython::kObType);
  for (int depth = 0; type && *type && depth < kMostBases; ++depth) {
    const auto members = image.read_u64(*type + cpython::kTpMembers);
    for (int i = 0; members && *members && i < kMostMembers; ++i) {
      std::uint64_t m[3] = {};
      if (!image.read_exact(*members + i * kMemberBytes, m, sizeof m) || m[0] == 0) break;
      if (m[kMemberOffset / 8] == offset) {
        const std::optional<std::string> name = image.read_c_string(m[0], 64);
        return name && !name->empty() ? "." + *name : std::string();
      }
    }
    type = image.read_u64(*type + cpython::kTpBase);
  }
  return {};
}

// The class named `name` among the heap's type objects when exactly one has that name; 0 otherwise.
Address class_named(const Image& image, const HeapModel& heap, const ObjectHeaders& headers, std::string_view name) {
  Address found = 0;
  for (std::size_t b = 0; b < headers.type_of.size() && b < heap.blocks.size(); ++b) {
    if (headers.type_of[b] >= headers.type_names.size() || headers.type_names[headers.type_of[b]] != "type") continue;
    const Address type = heap.blocks[b].address() + headers.object_offset(static_cast<std::uint32_t>(b));
    const auto tp_name = image.read_u64(type + cpython::kTpName);
    if (!tp_name || image.read_c_string(*tp_name, name.size() + 1) != name) continue;
    if (found) return 0;  // two classes of that name: which one is not known
    found = type;
  }
  return found;
}

// The name of key `index` of class `cls`'s shared keys (the keys its instances' values follow): ".tags";
// empty when unknown.
std::string shared_key(const Image& image, Address cls, std::uint64_t index, int minor) {
  const Address field = cpython::cached_keys_offset(minor);
  const auto keys = cls && field ? image.read_u64(cls + field) : std::nullopt;
  const std::optional<KeysEntries> e = keys && *keys ? keys_entries(image, *keys, minor) : std::nullopt;
  const std::optional<std::string> text = e ? key_text(image, *keys, *e, index, minor) : std::nullopt;
  return text ? "." + *text : std::string();
}

// The attribute a word of an instance's split dict values holds (3.11, 3.12: a block of its own, "Order.__dict__
// values", `object` bytes past its start), by its class's shared keys.
std::string attribute_at(const Image& image, const HeapModel& heap, const ObjectHeaders& headers, std::string_view type,
                         std::uint32_t object, std::uint64_t offset, int minor) {
  constexpr std::string_view kValues = ".__dict__ values";
  if (offset < object || !type.ends_with(kValues)) return {};
  const Address cls = class_named(image, heap, headers, type.substr(0, type.size() - kValues.size()));
  return shared_key(image, cls, (offset - object) / 8, minor);
}

// 3.13 keeps an instance's values inline, past its refcount and type and a word of sizes
// (Py_TPFLAGS_INLINE_VALUES): the attribute a word there holds, by the class's shared keys.
std::string inline_attribute_at(const Image& image, Address object, std::uint64_t offset, int minor) {
  constexpr std::uint64_t kInlineValues = 1u << 2, kFirstValue = 24;
  if (minor < 13 || offset < kFirstValue) return {};
  const auto cls = image.read_u64(object + cpython::kObType);
  const auto flags = cls ? image.read_u64(*cls + cpython::kTpFlags) : std::nullopt;
  if (!flags || !(*flags & kInlineValues)) return {};
  return shared_key(image, *cls, (offset - kFirstValue) / 8, minor);
}

}  // namespace

std::string cpython_field_at(const Image& image, const HeapModel& heap, const ObjectHeaders& headers,
                             std::size_t block, std::uint64_t offset) {
  if (block >= headers.type_of.size() || headers.type_of[block] >= headers.type_names.size()) return {};
  const std::string& type = headers.type_names[headers.type_of[block]];
  const Address base = heap.blocks[block].address();
  const int minor = static_cast<int>(headers.release);
  if (type == "list items") return fmt::format("[{}]", offset / 8);
  const std::uint32_t object = headers.object_offset(static_cast<std::uint32_t>(block));
  // The header's words: the collector's list links, and before them a managed dict's words (3.11+).
  if (const auto [first, last] = headers.links(static_cast<std::uint32_t>(block)); offset < last) {
    if (offset >= first) return offset == first ? "gc list next" : "gc list prev";
    // 3.11: the values, then the dict; 3.12: the weak references' list, then the dict or the values.
    if (minor <= 11) return offset == 0 ? "its __dict__ values" : "its __dict__";
    return offset == 0 ? "its weak references" : "its __dict__ or values";
  }
  if (type == "tuple" && offset >= object + 24) return fmt::format("[{}]", (offset - object - 24) / 8);
  if (type.ends_with(".__dict__ values")) return attribute_at(image, heap, headers, type, object, offset, minor);
  if (type != "dict keys") {
    // An object's field past its refcount and type (a block named "list items", "X.__dict__ values",
    // "tracemalloc trace" holds no object: its name has a space).
    if (offset < object + 16 || type.find(' ') != std::string::npos) return {};
    const std::string member = member_at(image, base + object, offset - object);
    return member.empty() ? inline_attribute_at(image, base + object, offset - object, minor) : member;
  }
  const std::optional<KeysEntries> e = keys_entries(image, base, minor);
  if (!e || offset < e->start) return {};
  const std::uint64_t entry = (offset - e->start) / e->size, within = (offset - e->start) % e->size;
  if (within != e->key && within != e->key + 8) return {};
  const std::optional<std::string> text = key_text(image, base, *e, entry, minor);
  const std::string name = text ? fmt::format("[\"{}\"]", *text) : fmt::format("[entry {}]", entry);
  return within == e->key ? "key of " + name : name;
}

bool check_cpython_objects(const Image& image, const SymbolIndex& symbols, const HeapModel& heap,
                           const ObjectHeaders& saved, std::span<const std::size_t> blocks, std::string* why) {
  const std::optional<Interpreter> interpreter = find_interpreter(image, symbols);
  if (!interpreter) {
    *why = "no CPython interpreter in the image";
    return false;
  }
  if (saved.starts.size() != heap.blocks.size() || saved.type_of.size() != heap.blocks.size()) {
    *why = "object headers of another heap";
    return false;
  }
  std::vector<std::string> names{""};
  Types types(image, names);
  ObjectFinder finder(image, interpreter->release, types);
  for (const std::size_t b : blocks) {
    if (b >= heap.blocks.size()) continue;
    const Block& block = heap.blocks[b];
    const std::optional<Found> f = is_allocated(block.state) ? finder.find(block) : std::nullopt;
    const std::uint8_t start = f && f->offset ? static_cast<std::uint8_t>(f->offset | (f->links ? ObjectHeaders::kLinksBefore : 0)) : 0;
    const bool same = f ? saved.starts[b] == start && saved.type_of[b] < saved.type_names.size() &&
                              saved.type_names[saved.type_of[b]] == names[f->facts->name]
                        : !(saved.starts[b] & ObjectHeaders::kLinksBefore);
    if (!same) {
      *why = "block " + std::to_string(b) + "'s object header differs";
      return false;
    }
  }
  return true;
}

}  // namespace heapscope
