#include "queries/block_refs.h"

#include <fmt/format.h>

#include "model/graph_closure.h"


namespace heapscope {

BlockRef block_ref(Session& s, const BlockNames& names, BlockId b) {
  const Block& blk = s.heap().blocks[b];
  return {blk.address(), blk.usable_size(), names.types.name(b, blk), std::string(naming_name(names.types.naming(b)))};
}

RootRef root_ref(Session& s, const BlockNames& names, std::size_t root, BlockId target) {
  const RootRange& r = s.roots().ranges[root];
  const std::vector<Address> sites = s.graph().root_edge_sites(root, target);
  RootRef ref;
  ref.kind = root_kind_name(r.kind);
  if (r.kind == RootKind::registers) {
    const Address reg = sites.empty() ? static_cast<Address>(Reg::rax) : sites.front();
    ref.label = describe_root(s.image(), s.symbols(), r, reg);
    return ref;
  }
  const Address found = sites.empty() ? 0 : sites.front();
  ref.address = found;
  if (r.kind == RootKind::global && found) ref.field = variable_field(s.image(), *names.dwarf, r.module, found);
  // Unwinding costs a little; only a stack root needs the frames for its label.
  ref.label = describe_root(s.image(), s.symbols(), r, found ? found : r.start,
                            r.kind == RootKind::stack ? &s.frames() : nullptr);
  return ref;
}

RetainedBytes::RetainedBytes(Session& s, RetainedSizes how)
    : s_(s), tree_(how == RetainedSizes::dominator_tree ? &s.retention() : s.retention_if_at_hand()),
      // Building the tree reads every edge a few times over; removal is worth trying up to about that.
      budget_(tree_ ? 0 : 2 * (s.graph().edge_count() + s.graph().block_count())) {}

std::uint64_t RetainedBytes::operator()(BlockId b) {
  if (!tree_) {
    if (const auto bytes = retained_by_removal(s_.graph(), s_.retention_edges(), s_.heap(), s_.verdicts(), b, &budget_)) return *bytes;
    tree_ = &s_.retention();
  }
  return tree_->retained_bytes(b);
}

std::string runtime_field(Session& s, BlockId b, std::uint64_t offset) {
  const std::optional<ObjectHeaders>& headers = s.object_headers();
  return headers ? runtime_field_at(s.image(), s.heap(), *headers, b, offset) : std::string();
}

std::optional<std::uint64_t> pointer_offset(Session& s, BlockId from, BlockId to) {
  const std::vector<Address> sites = s.graph().edge_sites(from, to);
  if (sites.empty()) return std::nullopt;
  return sites.front() - s.heap().blocks[from].address();
}

std::uint64_t landing_offset(Session& s, Address site, BlockId to, const RootRange* root) {
  std::optional<std::uint64_t> value;
  if (!root || root->kind != RootKind::registers) value = s.image().read_u64(site);
  else
    for (const RegisterWord& w : register_words(s.image().threads()[root->thread]))
      if (w.slot == site) value = w.value;
  if (value && root && root->hidden_pointer) value = ~*value;
  const Address start = s.heap().blocks[to].address();
  return value && *value > start ? *value - start : 0;
}

namespace {

// Why an address inside a chunk names no allocated block: it is in malloc's header in front of a block,
// or in a chunk malloc holds as free.
std::string why_not_a_block(const Block& chunk, Address a) {
  if (is_allocated(chunk.state) && a < chunk.address())
    return fmt::format("is in malloc's chunk header, {} bytes before the block at 0x{:x}: give an address inside "
                       "the block",
                       chunk.address() - a, chunk.address());
  switch (chunk.state) {
    case BlockState::top:
      return fmt::format("is in the top chunk at 0x{:x} (free space at the arena's end), not an allocated block",
                         chunk.address());
    case BlockState::tcache:
    case BlockState::fastbin:
      return fmt::format("is in a free chunk at 0x{:x} (on a {} list), not an allocated block", chunk.address(),
                         block_state_name(chunk.state));
    case BlockState::free: return fmt::format("is in a free chunk at 0x{:x}, not an allocated block", chunk.address());
    default: return fmt::format("is in the chunk at 0x{:x}, but not inside its block", chunk.address());
  }
}

}  // namespace

BlockId block_argument(Session& s, const std::string& text, Address* address) {
  const Address a = s.evaluate_address(text);
  if (address) *address = a;
  const BlockId b = s.graph().index().find(a);
  if (b != kNoBlock) return b;
  if (const Block* any = s.heap().block_containing(a))
    throw AnalysisError(fmt::format("0x{:x} {}", a, why_not_a_block(*any, a)));
  throw AnalysisError(fmt::format("0x{:x} is not in any heap block", a));
}

}  // namespace heapscope
