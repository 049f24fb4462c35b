#include "runtime/cpython/cpython_objects.h"

#include <cstring>
#include <unordered_map>

namespace heapscope {

namespace {

constexpr std::uint32_t kGcHeadBytes = 16;      // _gc_next, _gc_prev
constexpr std::uint64_t kPrevFlags = 3;          // _gc_prev's low bits: COLLECTING, FINALIZED
constexpr std::uint64_t kMaxRefcount = 1ull << 40;  // far above any real count; rules out text and pointers
constexpr std::size_t kObjectBytes = kGcHeadBytes + 16;  // the header, ob_refcnt and ob_type

// Decides whether an address is a type object: its type's type must be PyType_Type, whose own type is
// itself (a metaclass's type is PyType_Type too). Answers are cached: a heap has few types.
class TypeCheck {
 public:
  explicit TypeCheck(const Image& image) : image_(image) {}

  bool is_type(Address type) {
    const auto [it, fresh] = known_.try_emplace(type, false);
    if (fresh) it->second = check(type);
    return it->second;
  }

 private:
  bool is_type_type(Address t) const {
    const auto own = image_.read_u64(t + 8);
    return own && *own == t;
  }

  bool check(Address type) const {
    if (type == 0 || type % 8) return false;
    const auto meta = image_.read_u64(type + 8);
    if (!meta || *meta == 0 || *meta % 8) return false;
    if (is_type_type(*meta)) return true;
    const auto meta_type = image_.read_u64(*meta + 8);
    return meta_type && is_type_type(*meta_type);
  }

  const Image& image_;
  std::unordered_map<Address, bool> known_;
};

// The header's links agree with their neighbours': next's prev and prev's next are this header.
bool on_consistent_list(const Image& image, Address head, std::uint64_t next, std::uint64_t prev) {
  const auto next_prev = image.read_u64(next + 8);
  const auto prev_next = image.read_u64(prev);
  return next_prev && prev_next && (*next_prev & ~kPrevFlags) == head && *prev_next == head;
}

bool is_gc_object(const Image& image, TypeCheck& types, const Block& block) {
  if (block.usable_size() < kObjectBytes) return false;
  const std::span<const std::byte> bytes = image.view(block.address(), kObjectBytes);
  if (bytes.size() < kObjectBytes) return false;
  std::uint64_t w[4];
  std::memcpy(w, bytes.data(), sizeof w);
  const std::uint64_t next = w[0], prev = w[1] & ~kPrevFlags, refcount = w[2], type = w[3];
  if (refcount == 0 || refcount > kMaxRefcount || !types.is_type(type)) return false;
  if (next == 0 && prev == 0) return true;  // untracked (e.g. a tuple of atoms)
  return next != 0 && prev != 0 && on_consistent_list(image, block.address(), next, prev);
}

}  // namespace

bool runs_cpython(const Image& image) {
  for (const Module& m : image.modules()) {
    const std::string_view name = m.name();
    if (name.starts_with("python") || name.starts_with("libpython")) return true;
  }
  return false;
}

std::optional<ObjectHeaders> find_cpython_objects(const Image& image, const HeapModel& heap) {
  if (!runs_cpython(image)) return std::nullopt;
  ObjectHeaders out;
  out.layout = "CPython PyGC_Head (16 bytes before each GC-tracked object)";
  out.header_bytes = kGcHeadBytes;
  out.link_bytes = kGcHeadBytes;
  out.marked.assign((heap.blocks.size() + 63) / 64, 0);
  TypeCheck types(image);
  for (std::size_t b = 0; b < heap.blocks.size(); ++b) {
    const Block& block = heap.blocks[b];
    if (!is_allocated(block.state) || !is_gc_object(image, types, block)) continue;
    out.marked[b / 64] |= std::uint64_t{1} << (b % 64);
    ++out.count;
  }
  if (out.count == 0) return std::nullopt;
  return out;
}

}  // namespace heapscope
