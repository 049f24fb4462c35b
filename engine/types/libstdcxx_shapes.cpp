#include "types/libstdcxx_shapes.h"

#include <cstring>
#include <vector>

#include "base/progress.h"
#include "base/workers.h"
#include "image/memory_cursor.h"
#include "types/layout_inference.h"

namespace heapscope {

namespace {

constexpr std::uint64_t kLongestOwnerScanned = 1 << 16;  // bytes of an owner searched for container objects
constexpr std::uint64_t kMostNodes = 1 << 22;            // nodes followed in one container
constexpr std::uint64_t kLargestCapacity = std::uint64_t{1} << 40;

class ShapeNamer {
 public:
  // A namer that only looks (`dry`) names nothing: what it finds is a superset of what naming finds, since
  // a name given only rules blocks out of later shapes.
  ShapeNamer(const Image& image, const HeapModel& heap, const BlockIndex& index, const std::vector<bool>& targets,
             const std::vector<bool>* within, BlockTypes& types, bool dry)
      : image_(image), heap_(heap), index_(index), targets_(targets), within_(within), types_(types), mem_(image),
        dry_(dry) {}

  std::vector<ListOrRing> take_lists_or_rings() { return std::move(lists_or_rings_); }

  // Tries every shape whose object could start at `a` (a word of an owner block); true when one fits.
  bool try_at(Address a) {
    const auto first = word(a), second = word(a + 8);
    if (!first || !second) return false;
    // Every shape's object holds a pointer to one of its unnamed target blocks in its first two words,
    // or (a hashtable with one bucket) to its own single bucket: most words are ruled out here.
    // The words are tried in order, so this word's target was its predecessor's second (while looking,
    // no name changes what target_at says).
    const BlockId at_first = dry_ && a == looked_up_at_ ? looked_up_ : target_at(*first);
    const BlockId at_second = target_at(*second);
    looked_up_at_ = a + 8;
    looked_up_ = at_second;
    if (at_first == kNoBlock && at_second == kNoBlock && *first != a + 48) return false;
    if (at_first != kNoBlock && (string_body(a, at_first) || vector_body(a, at_first) || deque(a, at_first)))
      return true;
    if ((at_first != kNoBlock || *first == a + 48) && hashtable(a)) return true;  // buckets: a target or its own
    if (at_first != kNoBlock && list(a)) return true;  // the sentinel's next is the first node
    return at_second != kNoBlock && rb_tree(a);        // the header's second word is the root node
  }

 private:
  const Image& image_;
  const HeapModel& heap_;
  const BlockIndex& index_;
  const std::vector<bool>& targets_;
  const std::vector<bool>* within_;  // the blocks to name (null: all); shapes are checked over all targets
  BlockTypes& types_;
  MemoryCursor mem_;
  bool dry_;
  Address looked_up_at_ = 0;      // the word whose target_at was last asked for (0: none)
  BlockId looked_up_ = kNoBlock;  // and its answer
  std::vector<ListOrRing> lists_or_rings_;

  WordRead word(Address a) { return mem_.u64(a); }

  // The block starting exactly at `a` (BlockIndex::starting_at), among the blocks to name and still unnamed.
  BlockId target_at(Address a) const {
    const BlockId b = index_.starting_at(a);
    return b != kNoBlock && targets_[b] && types_.type_id(b) == BlockTypes::kUnknown ? b : kNoBlock;
  }
  // The block was sized for `bytes` (as its allocator rounds a request up).
  bool sized_for(BlockId b, std::uint64_t bytes) const {
    const auto [lo, hi] = fitting_sizes(heap_.blocks[b]);
    return bytes >= lo && bytes <= hi;
  }
  void name(BlockId b, const char* what) {
    if (!dry_ && targets_[b] && (!within_ || (*within_)[b]) && types_.type_id(b) == BlockTypes::kUnknown)
      types_.set(b, types_.intern(what, Naming::pattern));
  }
  // The container object itself, when it fills a block of its own (made by `new std::map<…>`, say):
  // its shape fits at the block's start and the block was sized for the object alone.
  void name_object(Address object, std::uint64_t object_bytes, const char* what) {
    const BlockId b = index_.starting_at(object);
    if (b != kNoBlock && sized_for(b, object_bytes)) name(b, what);
  }

  bool string_body(Address a, BlockId body) {
    const auto length = word(a + 8), capacity = word(a + 16);
    if (!length || !capacity || *capacity < 16 || *capacity >= kLargestCapacity || *length > *capacity) return false;
    if (!sized_for(body, *capacity + 1)) return false;
    std::uint8_t terminator = 1;
    if (!image_.read_exact(heap_.blocks[body].address() + *length, &terminator, 1) || terminator != 0) return false;
    name(body, "std::string body");
    name_object(a, 32, "std::string");
    return true;
  }

  bool vector_body(Address a, BlockId body) {
    const Address begin = heap_.blocks[body].address();
    const auto end = word(a + 8), storage_end = word(a + 16);
    if (!end || !storage_end || *end < begin || *storage_end < *end || *storage_end == begin) return false;
    if (!sized_for(body, *storage_end - begin)) return false;
    name(body, "std::vector body");
    name_object(a, 24, "std::vector");
    return true;
  }

  // _List_node_header: next, prev, size; each node starts with next, prev.
  bool list(Address a) {
    // The sentinel is the list object's own node, inside its owner (its first member when it starts the
    // block), or a block of its own sized for the list object alone (`new std::list`). When that block's
    // nodes are its size (std::list<int>, of pointers), the ring could as well be the program's own
    // nodes, one of whose third word happens to count the others: such a ring is handed back unnamed
    // (lists_or_rings) for DWARF to settle.
    const auto size = word(a + 16);  // first: a word most places rule out, before a block lookup
    if (!size || *size == 0 || *size > kMostNodes) return false;
    const BlockId starting = index_.starting_at(a);
    const BlockId own = starting != kNoBlock && sized_for(starting, 24) ? starting : kNoBlock;
    std::vector<BlockId> nodes;
    bool nodes_sized_as_own = false;
    Address previous = a;
    auto next = word(a);
    while (next && *next != a && nodes.size() <= *size) {
      const BlockId node = target_at(*next);
      const auto back = word(*next + 8);
      if (node == kNoBlock || !back || *back != previous || heap_.blocks[node].usable_size() < 24) return false;
      if (own != kNoBlock && heap_.blocks[node].usable_size() == heap_.blocks[own].usable_size())
        nodes_sized_as_own = true;
      nodes.push_back(node);
      previous = *next;
      next = word(*next);
    }
    const auto last = word(a + 8);
    if (!next || *next != a || nodes.size() != *size || !last || *last != previous) return false;
    if (nodes_sized_as_own) {
      if (!dry_) lists_or_rings_.push_back({own, std::move(nodes)});
      return true;
    }
    for (const BlockId node : nodes) name(node, "std::list node");
    if (own != kNoBlock) name(own, "std::list");
    return true;
  }

  // _Rb_tree_header: colour (red), parent (the root), left (leftmost), right (rightmost), node count;
  // each node: colour, parent, left, right, then its value.
  bool rb_tree(Address header) {
    const auto colour = word(header), root = word(header + 8), leftmost = word(header + 16),
               rightmost = word(header + 24), count = word(header + 32);
    if (!colour || (*colour & 0xffffffff) != 0 || !root || !leftmost || !rightmost || !count || *count == 0 ||
        *count > kMostNodes || target_at(*root) == kNoBlock)
      return false;
    const auto root_parent = word(*root + 8);
    if (!root_parent || *root_parent != header) return false;
    std::vector<BlockId> nodes;
    std::vector<Address> pending{*root};
    Address lowest = *root, highest = *root;  // the leftmost and rightmost nodes, found by walking
    while (!pending.empty()) {
      const Address node = pending.back();
      pending.pop_back();
      const BlockId b = target_at(node);
      const auto node_colour = word(node), left = word(node + 16), right = word(node + 24);
      if (b == kNoBlock || !node_colour || (*node_colour & 0xffffffff) > 1 || !left || !right ||
          heap_.blocks[b].usable_size() < 40 || nodes.size() >= *count)
        return false;
      nodes.push_back(b);
      for (const Address child : {*left, *right}) {
        if (child == 0) continue;
        const auto parent = word(child + 8);
        if (!parent || *parent != node) return false;
        pending.push_back(child);
      }
      if (node == lowest && *left) lowest = *left;
      if (node == highest && *right) highest = *right;
    }
    if (nodes.size() != *count || lowest != *leftmost || highest != *rightmost) return false;
    for (const BlockId b : nodes) name(b, "std::map/set node");
    name_object(header - 8, 48, "std::map/set");  // the header follows the (empty) comparator's word
    return true;
  }

  // _Hashtable: buckets, bucket count, before-begin's next (the first node), element count, the rehash
  // policy (max load factor as a float, next resize), the single bucket used when there is one bucket.
  bool hashtable(Address a) {
    // The counts first: most words are no counts, and the words past them may lie in the next block.
    const auto bucket_count = word(a + 8);
    if (!bucket_count || *bucket_count == 0 || *bucket_count > kLargestCapacity) return false;
    const auto count = word(a + 24);
    if (!count || *count == 0 || *count > kMostNodes) return false;
    const auto buckets = word(a), first = word(a + 16), policy = word(a + 32);
    if (!buckets || !first || !policy) return false;
    float max_load = 0;
    const auto load_bits = static_cast<std::uint32_t>(*policy);
    std::memcpy(&max_load, &load_bits, sizeof max_load);
    if (!(max_load > 0.0f && max_load <= 64.0f)) return false;
    BlockId bucket_array = kNoBlock;
    if (*buckets != a + 48) {
      bucket_array = target_at(*buckets);
      if (bucket_array == kNoBlock || !sized_for(bucket_array, *bucket_count * 8)) return false;
    } else if (*bucket_count != 1) {
      return false;
    }
    std::vector<BlockId> nodes;
    for (auto node = first; node && *node != 0; node = word(*node)) {
      const BlockId b = target_at(*node);
      if (b == kNoBlock || nodes.size() >= *count) return false;
      nodes.push_back(b);
    }
    if (nodes.size() != *count) return false;
    for (const BlockId b : nodes) name(b, "std::unordered_map/set node");
    if (bucket_array != kNoBlock) name(bucket_array, "std::unordered_map/set buckets");
    name_object(a, 56, "std::unordered_map/set");
    return true;
  }

  // _Deque_impl: map, map size, start and finish iterators (cur, first, last, node each): each iterator's
  // chunk is what its map slot points to, cur lies in it, and last is its end.
  bool deque(Address a, BlockId map) {
    const auto map_size = word(a + 8);
    if (!map_size || *map_size < 8 || *map_size > kMostNodes || !sized_for(map, *map_size * 8)) return false;
    const Address map_start = heap_.blocks[map].address(), map_end = map_start + *map_size * 8;
    Address nodes[2] = {0, 0};
    for (int i = 0; i < 2; ++i) {
      const Address it = a + 16 + 32 * static_cast<Address>(i);
      const auto cur = word(it), chunk_first = word(it + 8), chunk_last = word(it + 16), node = word(it + 24);
      if (!cur || !chunk_first || !chunk_last || !node || *node < map_start || *node >= map_end ||
          (*node - map_start) % 8 != 0)
        return false;
      const auto slot = word(*node);
      const BlockId chunk = index_.starting_at(*chunk_first);
      if (!slot || *slot != *chunk_first || chunk == kNoBlock || *cur < *chunk_first || *cur > *chunk_last ||
          !sized_for(chunk, *chunk_last - *chunk_first))
        return false;
      nodes[i] = *node;
    }
    if (nodes[0] > nodes[1]) return false;
    std::vector<BlockId> chunks;
    for (Address node = nodes[0]; node <= nodes[1]; node += 8) {
      const auto chunk_start = word(node);
      const BlockId chunk = chunk_start ? target_at(*chunk_start) : kNoBlock;
      if (chunk == kNoBlock) return false;
      chunks.push_back(chunk);
    }
    name(map, "std::deque map");
    for (const BlockId chunk : chunks) name(chunk, "std::deque chunk");
    name_object(a, 80, "std::deque");
    return true;
  }
};

}  // namespace

std::vector<ListOrRing> name_libstdcxx_shapes(const Image& image, const HeapModel& heap, const BlockIndex& index,
                                              std::span<const BlockId> owners, const std::vector<bool>& targets,
                                              const std::vector<bool>* within, BlockTypes& types) {
  // Reading every word of every owner is the cost: the workers look (each over a slice of the owners) for
  // the words where some shape fits, and the shapes found are then named in the owners' order, as one
  // pass would name them.
  const unsigned n = worker_count(owners.size(), 1 << 14);
  std::vector<std::vector<Address>> fits(n);
  run_workers(n, [&](unsigned w) {
    ShapeNamer looker(image, heap, index, targets, within, types, /*dry=*/true);
    const auto [first, last] = slice_of(owners.size(), n, w);
    for (std::size_t i = first; i < last; ++i) {
      if ((i - first) % 4096 == 4095) progress_check();
      const Block& b = heap.blocks[owners[i]];
      const Address end = b.address() + std::min(b.usable_size(), kLongestOwnerScanned);
      for (Address a = b.address(); a + 24 <= end; a += 8)
        if (looker.try_at(a)) fits[w].push_back(a);
    }
  });
  ShapeNamer namer(image, heap, index, targets, within, types, /*dry=*/false);
  for (const auto& slice : fits)
    for (const Address a : slice) namer.try_at(a);
  return namer.take_lists_or_rings();
}

}  // namespace heapscope
