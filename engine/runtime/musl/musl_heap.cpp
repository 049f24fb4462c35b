#include "runtime/musl/musl_heap.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "base/phase_timer.h"
#include "runtime/walk_problems.h"

namespace heapscope::musl {

namespace {

constexpr unsigned kMaxNesting = 8;  // groups in slots of groups in slots…: a handful deep at most
// The largest mapping a meta can describe that a block (16-byte units in 32 bits) can hold.
constexpr std::uint64_t kMaxMapPages = (std::uint64_t{0xffffffff} * 16) / kPageBytes;

const MetaLayout kMeta;
const MetaAreaLayout kArea;
const ContextLayout kContext;
const GroupLayout kGroup;

// One live meta and the group it describes.
struct Group {
  Address meta = 0, mem = 0;
  std::uint32_t avail = 0, freed = 0;
  MetaBits bits;
  std::uint64_t stride = 0;
  bool reached = false;  // walked (a nested group: from its container slot)

  std::uint64_t slots() const { return bits.last_idx + 1; }
  std::uint64_t all_slots() const { return (std::uint64_t{2} << bits.last_idx) - 1; }
  Address storage() const { return mem + kGroup.storage; }
  Address slots_end() const { return storage() + slots() * stride; }
  bool mmapped_alone() const { return bits.sizeclass == kMmapClass; }
  bool nested() const { return bits.maplen == 0 && bits.freeable; }
  // What the group occupies on its own: its mapping, or (memory the dynamic linker donated) its slots.
  Address region_end() const { return bits.maplen ? mem + bits.maplen * kPageBytes : slots_end(); }
};

class Walker {
 public:
  Walker(const Image& image, const Runtime& rt) : image_(image), rt_(rt) {}

  HeapModel run() {
    model_.allocator = "musl";
    model_.version = rt_.version;
    model_.state_labels = {"in use", "mmapped", "free", "", "", ""};
    model_.terms = {"context", "groups", "group", "cached", "musl keeps no per-thread caches"};
    model_.discovery = rt_.discovery;
    model_.warnings = rt_.warnings;
    model_.complete = !rt_.areas_missing;
    arena_.address = rt_.context;
    arena_.is_main = true;
    {
      PhaseTimer timer("walk: musl meta areas");
      read_areas();
    }
    {
      PhaseTimer timer("walk: musl groups");
      for (Group& g : groups_)
        if (!g.nested()) walk_top_level(g);
      for (const Group& g : groups_)
        if (g.nested() && !g.reached)
          problem("nested_group", g.mem, "a group inside an in-use slot of a larger group",
                  fmt::format("a group (meta 0x{:x}) no in-use slot holds", g.meta), "group",
                  "its slots are not walked", true);
      check_active_lists();
    }
    finish();
    return std::move(model_);
  }

  HeapVerification verification() && { return std::move(verification_); }

 private:
  void problem(const std::string& kind, Address at, std::string expected, std::string found, std::string where,
               std::string affects, bool damage) {
    if (damage) {
      model_.complete = false;
      arena_.complete = false;
    }
    HeapFinding f;
    f.kind = kind;
    f.chunk = at;
    f.expected = std::move(expected);
    f.found = std::move(found);
    f.arena = rt_.context;
    f.heap = current_group_;
    f.where = std::move(where);
    f.affects = std::move(affects);
    problems_.add(std::move(f), verification_, model_.warnings);
  }

  // Every live meta of every area (a free meta is zeroed: no group), checked against its group.
  void read_areas() {
    std::vector<std::uint8_t> page(MetaAreaLayout::kBytes);
    for (const Address area : rt_.areas) {
      model_.metadata.push_back({area, area + MetaAreaLayout::kBytes});
      const std::size_t got = image_.read(area, page.data(), page.size());
      const std::uint64_t nslots = std::min<std::uint64_t>(u32_at(page.data(), kArea.nslots), MetaAreaLayout::kSlots);
      total_meta_slots_ += nslots;
      for (std::uint64_t k = 0; k < nslots; ++k) {
        const std::uint64_t offset = kArea.slots + k * kMeta.size;
        if (offset + kMeta.size > got) {
          problem("meta_area", area, "a readable meta area", fmt::format("only {} bytes readable", got), "meta area",
                  "the groups of its other metas are not walked", true);
          break;
        }
        const std::uint8_t* m = page.data() + offset;
        Group g;
        g.meta = area + offset;
        g.mem = u64_at(m, kMeta.mem);
        if (g.mem == 0) continue;
        g.avail = u32_at(m, kMeta.avail_mask);
        g.freed = u32_at(m, kMeta.freed_mask);
        g.bits = decode_meta_bits(u64_at(m, kMeta.bits));
        if (accept(g)) groups_.push_back(g);
      }
    }
    std::sort(groups_.begin(), groups_.end(), [](const Group& a, const Group& b) { return a.mem < b.mem; });
    for (std::size_t i = 0; i < groups_.size(); ++i) by_mem_.emplace(groups_[i].mem, i);
    ++verification_.checked.arenas;
    verification_.checked.tcaches = rt_.areas.size();
  }

  // Whether a meta's fields fit mallocng's rules and its group points back at it.
  bool accept(Group& g) {
    const MetaBits& b = g.bits;
    const bool classed = b.sizeclass < kSizeClasses;
    std::string wrong;
    if (!classed && b.sizeclass != kMmapClass) wrong = fmt::format("size class {}", b.sizeclass);
    else if (!classed && (b.last_idx != 0 || b.maplen == 0)) wrong = "an individual mapping with more than one slot";
    else if (b.maplen > kMaxMapPages) wrong = fmt::format("a mapping of {} pages", b.maplen);
    else if ((g.avail & g.freed) != 0 || ((std::uint64_t{g.avail} | g.freed) & ~g.all_slots()) != 0)
      wrong = fmt::format("avail mask 0x{:x}, freed mask 0x{:x} for {} slots", g.avail, g.freed, g.slots());
    else if ((g.mem & (kUnit - 1)) != 0) wrong = fmt::format("a group at 0x{:x}", g.mem);
    if (!wrong.empty()) {
      problem("meta", g.meta, "a size class, masks and mapping that fit mallocng's", wrong, "meta",
              "its group is not walked", true);
      return false;
    }
    g.stride = (b.last_idx == 0 && b.maplen) ? b.maplen * kPageBytes - kUnit : kUnit * kClassUnits[b.sizeclass];
    if (b.maplen && g.slots_end() > g.mem + b.maplen * kPageBytes) {
      problem("meta", g.meta, "slots that fit the group's mapping",
              fmt::format("{} slots of {} bytes in {} pages", g.slots(), g.stride, b.maplen), "meta",
              "its group is not walked", true);
      return false;
    }
    const auto back = image_.read_u64(g.mem + kGroup.meta);
    if (!back || *back != g.meta) {
      problem("group", g.mem, fmt::format("a group header pointing back at its meta 0x{:x}", g.meta),
              back ? fmt::format("0x{:x}", Address{*back}) : std::string("unreadable memory"), "group",
              "its slots are not walked", true);
      return false;
    }
    return true;
  }

  // A group with memory of its own: a mapping (one of the arena's groups, or an individually mmapped
  // allocation), or memory the dynamic linker donated.
  void walk_top_level(Group& g) {
    if (g.mmapped_alone()) {
      walk_group(g, Block::kNoArena, 0);
      return;
    }
    const Address end = g.region_end();
    if (!arena_.heaps.empty() && g.mem < arena_.heaps.back().end) {
      problem("group", g.mem, "groups that do not overlap",
              fmt::format("a group overlapping the one that ends at 0x{:x}", arena_.heaps.back().end), "group",
              "its slots are not walked", true);
      return;
    }
    arena_.heaps.push_back({g.mem, end});
    arena_.system_bytes += end - g.mem;
    walk_group(g, 0, 0);
  }

  void walk_group(Group& g, std::uint16_t arena, unsigned depth) {
    g.reached = true;
    const Address saved_group = current_group_;
    current_group_ = g.mem;
    ++verification_.checked.heaps;
    if (g.nested()) ++nested_groups_;
    SizeClassUse* use = nullptr;
    if (!g.mmapped_alone()) {
      use = &classes_[g.stride];
      use->object_bytes = g.stride;
      ++use->slabs;
      use->slab_bytes += g.slots_end() - g.mem;
    } else {
      ++mmapped_groups_;
    }
    for (std::uint64_t i = 0; i < g.slots(); ++i) {
      const Address start = g.storage() + i * g.stride;
      const std::uint32_t bit = std::uint32_t{1} << i;
      if ((g.avail | g.freed) & bit) {
        const bool available = (g.avail & bit) != 0;
        (available ? available_ : freed_).add(g.stride);
        if (use) ++use->free;
        push(Block::inband(start - kInbandBytes, g.stride, BlockState::free, arena));
        continue;
      }
      walk_slot(g, i, start, arena, depth, use);
    }
    if (g.mmapped_alone()) {
      model_.mmapped_total.add(g.bits.maplen * kPageBytes);
    }
    current_group_ = saved_group;
  }

  // An in-use slot: its object (where its in-band header says), its requested size, or the nested group it holds.
  void walk_slot(const Group& g, std::uint64_t i, Address start, std::uint16_t arena, unsigned depth,
                 SizeClassUse* use) {
    const Address end = start + g.stride - kInbandBytes;  // the object's room ends here
    const std::string where = fmt::format("slot {} of group 0x{:x}", i, g.mem);
    std::uint8_t h[4];
    Address p = start;
    bool header_ok = image_.read_exact(start - kInbandBytes, h, sizeof h);
    if (header_ok && slot_header(h).reserved_code() == kOffsetMarker) {
      p = start + kUnit * slot_header(h).offset;
      header_ok = p > start && p < end && image_.read_exact(p - kInbandBytes, h, sizeof h);
    }
    const SlotHeader sh = slot_header(h);
    if (header_ok) header_ok = sh.slot() == i && object_offset_ok(g, p, sh);
    ++verification_.checked.bin_entries;
    if (!header_ok) {
      problem("slot_header", p, fmt::format("an in-band header naming slot {} and its offset from the group", i),
              fmt::format("bytes {:02x} {:02x} {:02x} {:02x}", h[0], h[1], h[2], h[3]), where,
              "the block is taken to start at its slot", true);
      p = start;
    }
    // A slot holding a smaller class's group (marked by its reserved code, and named by that group's meta).
    if (const auto nested = by_mem_.find(p); nested != by_mem_.end() && header_ok) {
      Group& inner = groups_[nested->second];
      // The nested group's last slot ends where the container's room does (its last 4 bytes are the next
      // slot's header, as every slot's are).
      if (inner.nested() && !inner.reached && inner.slots_end() - kInbandBytes <= end && depth < kMaxNesting) {
        if (sh.reserved_code() != kNestedGroup)
          problem("nested_group", p, "a slot holding a group marked so (reserved code 6)",
                  fmt::format("reserved code {}", sh.reserved_code()), where, "none (the group is walked)", false);
        if (use) ++use->in_use;
        walk_group(inner, arena, depth + 1);
        return;
      }
    }
    if (header_ok && sh.reserved_code() == kNestedGroup)
      problem("nested_group", p, "a group that a meta describes in a slot marked as holding one",
              "no meta names a group there", where, "the slot is taken as an ordinary block", true);
    const bool alone = g.mmapped_alone();
    if (header_ok) check_reserved(p, end, sh, where);
    if (use) ++use->in_use;
    const Block b = Block::inband(p - kInbandBytes, end - p + kInbandBytes, alone ? BlockState::mmapped : BlockState::in_use,
                                  arena);
    push(b);
    if (alone) {
      model_.mmapped_chunks.add(b.chunk_size());
      model_.metadata.push_back({g.mem, b.chunk});
      model_.metadata.push_back({b.chunk_end(), g.region_end()});
    }
  }

  // The object's offset from the group's storage, as its header keeps it (16 bits, or 32 bits before it).
  bool object_offset_ok(const Group& g, Address p, const SlotHeader& sh) {
    const std::uint64_t units = (p - g.storage()) / kUnit;
    if (sh.check == 0) return sh.offset == units;
    const auto wide = image_.read_u32(p - 8);
    return sh.offset == 0 && wide && *wide == units && units > 0xffff;
  }

  // The reserved bytes (room the program did not ask for) as the header and the slot's end record them: the
  // byte where the request ends is 0, and so is the one past the room; the requested size is added up.
  void check_reserved(Address p, Address end, const SlotHeader& sh, const std::string& where) {
    std::uint64_t reserved = sh.reserved_code();
    bool ok = reserved <= kReservedCounted;
    if (ok && reserved == kReservedCounted) {
      const auto counted = image_.read_u32(end - 4);
      std::uint8_t before = 1;
      ok = counted && *counted >= kReservedCounted && image_.read_exact(end - 5, &before, 1) && before == 0;
      reserved = counted.value_or(0);
    }
    ok = ok && reserved <= end - p;
    std::uint8_t marks[2] = {1, 1};
    if (ok) ok = (reserved == 0 || image_.read_exact(end - reserved, &marks[0], 1)) &&
                 image_.read_exact(end, &marks[1], 1) && (reserved == 0 || marks[0] == 0) && marks[1] == 0;
    if (!ok) {
      problem("reserved", p, "reserved bytes that match the slot's end (a zero where the request ends and past the room)",
              fmt::format("reserved code {}, {} bytes", sh.reserved_code(), reserved), where,
              "none (a write past the requested size, or a damaged header)", false);
      return;
    }
    requested_bytes_ += end - reserved - p;
  }

  // Each size class's active list: circular, back links true, its groups live metas of the class.
  void check_active_lists() {
    if (!rt_.context) return;
    std::unordered_map<Address, const Group*> by_meta;
    for (const Group& g : groups_) by_meta.emplace(g.meta, &g);
    for (unsigned sc = 0; sc < kSizeClasses; ++sc) {
      const auto head = image_.read_u64(rt_.context + kContext.active + 8 * sc);
      if (!head || *head == 0) continue;
      Address at = *head, prev = 0;
      for (std::size_t n = 0;; ++n) {
        const auto it = by_meta.find(at);
        const auto back = image_.read_u64(at + kMeta.prev);
        if (it == by_meta.end() || it->second->bits.sizeclass != sc || n > groups_.size() ||
            (prev && (!back || *back != prev))) {
          problem("active_list", at, fmt::format("a live meta of size class {} linked both ways", sc),
                  it == by_meta.end() ? "no live meta" : "a meta of another class, a loop or a wrong back link",
                  fmt::format("active list of size class {} ({} bytes)", sc, kUnit * kClassUnits[sc]),
                  "none (slot states come from each group's masks)", false);
          break;
        }
        ++verification_.checked.fastbin_entries;
        prev = at;
        const auto next = image_.read_u64(at + kMeta.next);
        if (!next || *next == *head) break;
        at = *next;
      }
    }
  }

  void push(const Block& b) {
    ++verification_.checked.chunks;
    blocks_.push_back(b);
    if (b.arena != Block::kNoArena) arena_.totals[static_cast<int>(b.state)].add(b.chunk_size());
  }

  // Blocks in address order (nested groups were walked inside their containers), the arena's overhead as what
  // its groups hold beyond their blocks, and the figures.
  void finish() {
    std::sort(blocks_.begin(), blocks_.end(), [](const Block& a, const Block& b) { return a.chunk < b.chunk; });
    model_.blocks = BlockArray(blocks_.size());
    std::uint64_t in_arena = 0;
    for (const Block& b : blocks_) {
      if (!model_.blocks.empty() && model_.blocks[model_.blocks.size() - 1].chunk_end() > b.chunk) {
        problem("group", b.chunk, "slots that do not overlap", "a slot overlapping the one before", "group",
                "the later slot is left out", true);
        if (b.arena != Block::kNoArena) arena_.totals[static_cast<int>(b.state)].remove(b.chunk_size());
        continue;
      }
      model_.blocks.push_back(b);
      if (b.arena != Block::kNoArena) in_arena += b.chunk_size();
    }
    arena_.overhead_bytes = arena_.system_bytes > in_arena ? arena_.system_bytes - in_arena : 0;
    problems_.add_suppressed(model_.warnings);
    for (auto& [stride, use] : classes_) model_.size_classes.push_back(use);
    model_.free_pages = {
        {"available slots", "slots activated in their group and ready to hand out", available_.blocks, available_.bytes},
        {"freed slots", "slots the program freed, handed out again once their group's available ones run out",
         freed_.blocks, freed_.bytes},
    };
    if (rt_.context) model_.metadata.push_back({rt_.context, rt_.context + kContext.size});
    std::sort(model_.metadata.begin(), model_.metadata.end(),
              [](const HeapSegment& a, const HeapSegment& b) { return a.start < b.start; });
    model_.arenas.push_back(std::move(arena_));
    add_figures();
    verification_.object_word = "slot";
    verification_.counts_in_glibc_words = false;
    const HeapCheckCounts& c = verification_.checked;
    verification_.checked_in_own_words.push_back(fmt::format(
        "{} meta areas, {} groups ({} nested in other groups' slots, {} individually mmapped), {} slots; the in-band "
        "headers and reserved bytes of {} slots in use; {} groups on the context's active lists",
        c.tcaches, c.heaps, nested_groups_, mmapped_groups_, c.chunks, c.bin_entries, c.fastbin_entries));
  }

  // mallocng's own counters beside the walk's counts.
  void add_figures() {
    std::optional<std::uint64_t> usage, metas;
    std::uint64_t walked_usage = 0;
    for (const Group& g : groups_)
      if (g.reached && g.bits.sizeclass < kSizeClasses && g.bits.freeable) walked_usage += g.slots();
    std::uint64_t reached = 0;
    for (const Group& g : groups_) reached += g.reached ? 1 : 0;
    if (rt_.context) {
      std::uint64_t sum = 0;
      bool readable = true;
      for (unsigned sc = 0; sc < kSizeClasses && readable; ++sc) {
        const auto u = image_.read_u64(rt_.context + kContext.usage_by_class + 8 * sc);
        readable = u.has_value();
        sum += u.value_or(0);
      }
      if (readable) usage = sum;
      // Metas handed out (every listed area's slots but those not yet used) less those freed for reuse.
      const auto avail = image_.read_u64(rt_.context + kContext.avail_meta_count);
      const auto free_head = image_.read_u64(rt_.context + kContext.free_meta_head);
      if (avail && free_head && !rt_.areas_missing && *avail <= total_meta_slots_) {
        std::uint64_t freed = 0;
        std::unordered_set<Address> seen;
        Address at = *free_head;
        while (at && seen.insert(at).second && seen.size() <= total_meta_slots_) {
          ++freed;
          const auto next = image_.read_u64(at + kMeta.next);
          if (!next || *next == *free_head) break;
          at = *next;
        }
        if (total_meta_slots_ >= *avail + freed) metas = total_meta_slots_ - *avail - freed;
      }
    }
    model_.figures = {
        {"usage_by_class", "slots in the groups of the 48 size classes; mallocng's: Σ ctx.usage_by_class (memory the "
         "dynamic linker donated is not counted there, nor here)",
         usage, walked_usage},
        {"metas in use", "groups, each with its meta; mallocng's: the meta areas' slots, less those not yet handed "
         "out (ctx.avail_meta_count) and those on ctx.free_meta_head",
         metas, reached},
        {"requested bytes", "what the program asked for of the slots in use, as each slot's reserved bytes record it "
         "(malloc_usable_size's answer); the walk's blocks are the slots' room",
         requested_bytes_, std::nullopt},
    };
  }

  const Image& image_;
  const Runtime& rt_;
  HeapModel model_;
  HeapVerification verification_;
  ArenaInfo arena_;
  std::vector<Group> groups_;
  std::unordered_map<Address, std::size_t> by_mem_;
  std::vector<Block> blocks_;
  std::map<std::uint64_t, SizeClassUse> classes_;
  StateTotal available_, freed_;
  std::uint64_t total_meta_slots_ = 0, requested_bytes_ = 0, nested_groups_ = 0, mmapped_groups_ = 0;
  Address current_group_ = 0;
  WalkProblems problems_{"musl"};
};

}  // namespace

HeapModel walk_heap(const Image& image, const Runtime& runtime) { return Walker(image, runtime).run(); }

HeapVerification verify_heap(const Image& image, const Runtime& runtime) {
  Walker walker(image, runtime);
  walker.run();
  return std::move(walker).verification();
}

}  // namespace heapscope::musl
