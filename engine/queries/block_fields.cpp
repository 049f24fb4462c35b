#include "queries/block_fields.h"

#include <dwarf.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "queries/block_refs.h"

namespace heapscope {

namespace {

constexpr int kMaxDepth = 16;                  // structures within structures shown
constexpr std::size_t kMaxStringBytes = 256;  // of a char array shown as a string

bool is_char(const DwarfType& t) {
  return t.kind == DwarfType::Kind::base && t.size == 1 &&
         (t.encoding == DW_ATE_signed_char || t.encoding == DW_ATE_unsigned_char || t.encoding == DW_ATE_UTF);
}

std::string char_literal(std::uint32_t c) {
  switch (c) {
    case 0: return "'\\0'";
    case '\n': return "'\\n'";
    case '\t': return "'\\t'";
    case '\r': return "'\\r'";
    case '\'': return "'\\''";
    case '\\': return "'\\\\'";
    default: break;
  }
  if (c >= 32 && c < 127) return fmt::format("'{}'", static_cast<char>(c));
  return c < 256 ? fmt::format("'\\x{:02x}'", c) : fmt::format("U+{:04X}", c);
}

// The characters up to the first NUL as a quoted string, or nothing when one of them is not printable text.
std::optional<std::string> quoted(const std::uint8_t* bytes, std::size_t n) {
  std::string out = "\"";
  std::size_t i = 0;
  for (; i < n && bytes[i] != 0; ++i) {
    const std::uint8_t c = bytes[i];
    if (i == kMaxStringBytes) return out + "\"...";
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c >= 32 && c < 127) {
      out += static_cast<char>(c);
    } else {
      return std::nullopt;
    }
  }
  return out + "\"";
}

std::uint64_t little_endian(const std::uint8_t* bytes, std::size_t n) {
  std::uint64_t v = 0;
  std::memcpy(&v, bytes, std::min<std::size_t>(n, 8));
  return v;
}

std::int64_t sign_extend(std::uint64_t v, unsigned bits) {
  if (bits == 0 || bits >= 64) return static_cast<std::int64_t>(v);
  const std::uint64_t sign = std::uint64_t{1} << (bits - 1);
  v &= (sign << 1) - 1;
  return static_cast<std::int64_t>((v ^ sign) - sign);
}

std::string hex_bytes(const std::uint8_t* bytes, std::size_t n) {
  std::string out = "0x";
  for (std::size_t i = n; i-- > 0;) out += fmt::format("{:02x}", bytes[i]);  // little-endian: high byte first
  return out;
}

// A scalar of `size` bytes (an integer of `bits` bits when a bit field) as text, by its DWARF encoding.
std::string scalar_text(const DwarfType& t, const std::uint8_t* bytes, std::uint64_t raw, unsigned bits) {
  const bool is_signed = t.encoding == DW_ATE_signed || t.encoding == DW_ATE_signed_char ||
                         (t.kind == DwarfType::Kind::enumeration && t.encoding != DW_ATE_unsigned);
  switch (t.encoding) {
    case DW_ATE_boolean:
      return raw == 0 ? "false" : raw == 1 ? "true" : fmt::format("{}", raw);
    case DW_ATE_float:
      if (t.size == 4) {
        float f;
        std::memcpy(&f, bytes, 4);
        return fmt::format("{}", f);
      }
      if (t.size == 8) {
        double d;
        std::memcpy(&d, bytes, 8);
        return fmt::format("{}", d);
      }
      if (t.size == 16 && sizeof(long double) == 16) {
        long double d;
        std::memcpy(&d, bytes, 16);
        return fmt::format("{}", d);
      }
      return hex_bytes(bytes, t.size);
    case DW_ATE_complex_float:
      if (t.size == 8 || t.size == 16) {
        double re, im;
        if (t.size == 8) {
          float parts[2];
          std::memcpy(parts, bytes, 8);
          re = parts[0];
          im = parts[1];
        } else {
          std::memcpy(&re, bytes, 8);
          std::memcpy(&im, bytes + 8, 8);
        }
        return fmt::format("{} + {}i", re, im);
      }
      return hex_bytes(bytes, t.size);
    case DW_ATE_signed_char:
    case DW_ATE_unsigned_char:
    case DW_ATE_UTF:
      if (bits <= 32) {
        const std::int64_t number = is_signed ? sign_extend(raw, bits) : static_cast<std::int64_t>(raw);
        return fmt::format("{} {}", number, char_literal(static_cast<std::uint32_t>(raw)));
      }
      break;
    default:
      break;
  }
  if (bits > 64) return hex_bytes(bytes, t.size);  // __int128 and wider
  if (is_signed) return fmt::format("{}", sign_extend(raw, bits));
  return fmt::format("{}", raw);
}

class FieldWriter {
 public:
  FieldWriter(Session& s, const BlockNames& names, const DwarfTypeIndex& ix, Address base, std::uint64_t block_size,
              std::size_t max_rows)
      : s_(s), names_(names), ix_(ix), base_(base), block_size_(block_size), max_rows_(max_rows) {}

  BlockFields out;

  // Has room for another row; marks the fields truncated when not.
  bool room() {
    if (out.rows.size() < max_rows_) return true;
    out.truncated = true;
    return false;
  }

  // The value of type `id` at `offset`, named `label` (its full path `path`), and its fields below it.
  void value(const std::string& path, const std::string& label, DwarfTypeId id, std::uint64_t offset,
             std::uint32_t depth, const DwarfTypeMember* member = nullptr) {
    if (!room()) return;
    id = ix_.definition(id);
    if (id == kNoDwarfType) {
      add(path, label, "void", offset, "", depth);
      return;
    }
    if (const DwarfTypeId stored = stored_value_type(ix_, id); stored != kNoDwarfType) id = stored;  // raw storage
    const DwarfType& t = ix_.type(id);
    if (offset + std::max<std::uint64_t>(t.size, 1) > block_size_) {
      add(path, label, t.name, offset, "<past the block's end>", depth);
      return;
    }
    switch (t.kind) {
      case DwarfType::Kind::structure:
        if (t.declaration) {
          add(path, label, t.name, offset, "<incomplete type>", depth);
          return;
        }
        add(path, label, t.name, offset, "", depth);
        if (depth < kMaxDepth) members(path, id, offset, depth + 1);
        return;
      case DwarfType::Kind::array:
        array(path, label, t, offset, depth);
        return;
      case DwarfType::Kind::pointer: {
        const std::optional<std::uint64_t> w = s_.image().read_u64(base_ + offset);
        if (!w) {
          add(path, label, t.name, offset, "<unreadable>", depth);
          return;
        }
        add(path, label, t.name, offset, fmt::format("0x{:x}", *w), depth);
        if (*w) out.rows.back().points_to = pointer_target(s_, names_, *w);
        return;
      }
      case DwarfType::Kind::base:
      case DwarfType::Kind::enumeration:
        scalar(path, label, t, offset, depth, member);
        return;
      default:
        raw(path, label, t, offset, depth);
        return;
    }
  }

  // The members of structure `id` at `offset`: base classes as "<base Name>" groups, anonymous structures
  // and unions flattened into their parent (as C and C++ name their members).
  void members(const std::string& path, DwarfTypeId id, std::uint64_t offset, std::uint32_t depth) {
    for (const DwarfTypeMember& m : ix_.members(id)) {
      if (!room()) return;
      const DwarfTypeId type = ix_.definition(m.type);
      const bool structure = type != kNoDwarfType && ix_.type(type).kind == DwarfType::Kind::structure;
      if (m.base_class) {
        if (!holds_data(type, 0)) continue;  // an empty base: std::allocator, an EBO helper
        const std::string group = "<base " + (type == kNoDwarfType ? std::string("?") : ix_.type(type).name) + ">";
        add(path + group, group, type == kNoDwarfType ? "" : ix_.type(type).name, offset + m.offset, "", depth);
        if (structure && depth < kMaxDepth) members(path, type, offset + m.offset, depth + 1);
        continue;
      }
      if (m.name.empty() && structure && !ix_.type(type).declaration) {
        members(path, type, offset + m.offset, depth);
        continue;
      }
      const std::string label = "." + (m.name.empty() ? std::string("(anonymous)") : m.name);
      value(path + label, label, m.type, offset + m.offset, depth, m.bit_size ? &m : nullptr);
    }
  }

 private:
  Session& s_;
  const BlockNames& names_;
  const DwarfTypeIndex& ix_;
  Address base_;
  std::uint64_t block_size_;
  std::size_t max_rows_;

  // A structure with a data member somewhere, its base classes' included.
  bool holds_data(DwarfTypeId id, int depth) const {
    id = ix_.definition(id);
    if (id == kNoDwarfType || depth > kMaxDepth || ix_.type(id).kind != DwarfType::Kind::structure) return true;
    for (const DwarfTypeMember& m : ix_.members(id))
      if (!m.base_class || holds_data(m.type, depth + 1)) return true;
    return false;
  }

  void add(const std::string& path, const std::string& label, const std::string& type, std::uint64_t offset,
           std::string value, std::uint32_t depth) {
    FieldRow row;
    row.path = path;
    row.label = label;
    row.type = type;
    row.offset = offset;
    row.value = std::move(value);
    row.depth = depth;
    out.rows.push_back(std::move(row));
  }

  void array(const std::string& path, const std::string& label, const DwarfType& t, std::uint64_t offset,
             std::uint32_t depth) {
    const DwarfTypeId element_id = ix_.definition(t.target);
    const DwarfType* element = element_id == kNoDwarfType ? nullptr : &ix_.type(element_id);
    if (element && is_char(*element) && t.count) {
      std::vector<std::uint8_t> bytes(std::min<std::uint64_t>(t.count, kMaxStringBytes + 1));
      if (s_.image().read(base_ + offset, bytes.data(), bytes.size()) == bytes.size()) {
        if (std::optional<std::string> text = quoted(bytes.data(), bytes.size())) {
          add(path, label, t.name, offset, std::move(*text), depth);
          return;
        }
      }
    }
    add(path, label, t.name, offset, "", depth);
    if (!element || element->size == 0 || depth >= kMaxDepth) return;
    for (std::uint64_t i = 0; i < t.count && room(); ++i) {
      const std::string index = fmt::format("[{}]", i);
      value(path + index, index, t.target, offset + i * element->size, depth + 1);
    }
  }

  void scalar(const std::string& path, const std::string& label, const DwarfType& t, std::uint64_t offset,
              std::uint32_t depth, const DwarfTypeMember* member) {
    std::uint8_t bytes[16] = {};
    const std::size_t size = std::min<std::uint64_t>(t.size, sizeof bytes);
    if (size == 0 || s_.image().read(base_ + offset, bytes, size) != size) {
      add(path, label, t.name, offset, size ? "<unreadable>" : "", depth);
      return;
    }
    std::uint64_t raw = little_endian(bytes, size);
    unsigned bits = static_cast<unsigned>(t.size * 8);
    std::string type = t.name;
    if (member) {  // a bit field: its bits of the bytes from `offset`
      bits = member->bit_size;
      if (member->bit_offset + bits > 64) {
        add(path, label, type, offset, hex_bytes(bytes, size), depth);
        return;
      }
      std::uint8_t wide[8] = {};
      s_.image().read(base_ + offset, wide, std::min<std::uint64_t>(8, block_size_ - offset));
      raw = little_endian(wide, 8) >> member->bit_offset;
      if (bits < 64) raw &= (std::uint64_t{1} << bits) - 1;
      type += fmt::format(" : {}", bits);
    }
    add(path, label, type, offset, scalar_text(t, bytes, raw, bits), depth);
  }

  void raw(const std::string& path, const std::string& label, const DwarfType& t, std::uint64_t offset,
           std::uint32_t depth) {
    std::uint8_t bytes[16] = {};
    const std::size_t size = std::min<std::uint64_t>(t.size, sizeof bytes);
    if (size && s_.image().read(base_ + offset, bytes, size) == size) {
      add(path, label, t.name, offset, hex_bytes(bytes, size) + (t.size > size ? "..." : ""), depth);
    } else {
      add(path, label, t.name, offset, size ? "<unreadable>" : "", depth);
    }
  }
};

// The DWARF type of block `b`: from heap typing, or for a block named by its vtable that typing did not
// reach, the DWARF structure of that name in whichever module defines it.
DwarfTypeRef block_dwarf_type(Session& s, const BlockNames& names, BlockId b) {
  const DwarfTypes& dwarf = *names.dwarf;
  const BlockTypes& types = names.types;
  if (const DwarfTypeRef ref = dwarf.of_block(types, b); ref.known()) return ref;
  if (types.type_id(b) == BlockTypes::kUnknown) return {};
  const Block& block = s.heap().blocks[b];
  const std::string name = types.name(b, block);
  const auto& modules = s.image().modules();
  for (std::size_t m = 0; m < modules.size() && m < DwarfTypeRef::kNoModule; ++m) {
    const DwarfTypeIndex* ix = dwarf.index(m);
    const DwarfTypeId id = ix ? ix->find_structure(name) : kNoDwarfType;
    if (id != kNoDwarfType && ix->type(id).size <= block.usable_size())
      return DwarfTypeRef{static_cast<std::uint16_t>(m), id};
  }
  return {};
}

}  // namespace

std::string pointer_target(Session& s, const BlockNames& names, Address value) {
  return pointer_target(s, names, value, s.graph().index().find(value));
}

std::string pointer_target(Session& s, const BlockNames& names, Address value, BlockId to) {
  if (to != kNoBlock) {
    const BlockRef ref = block_ref(s, names, to);
    return fmt::format("block 0x{:x}{} ({}, {} bytes)", ref.address,
                       value == ref.address ? "" : fmt::format("+0x{:x}", value - ref.address), ref.type, ref.size);
  }
  if (s.image().module_at(value)) return s.symbols().describe(value);
  return {};
}

BlockFields block_fields(Session& s, const BlockNames& names, BlockId b, std::size_t max_rows) {
  const DwarfTypeRef ref = block_dwarf_type(s, names, b);
  if (!ref.known()) return {};
  const DwarfTypeIndex* ix = names.dwarf->index(ref.module);
  const DwarfTypeId id = ix ? ix->definition(ref.type) : kNoDwarfType;
  if (id == kNoDwarfType || ix->type(id).size == 0) return {};
  const Block& block = s.heap().blocks[b];
  const DwarfType& t = ix->type(id);
  // One object fills a block when its structure ends in a flexible array (the block holds its elements)
  // or when the block only starts with it (an arena's slab); otherwise as many as fit.
  const bool first_of_larger = names.types.first_object_type(names.types.type_id(b)) != BlockTypes::kUnknown;
  const std::uint64_t count = t.flexible || first_of_larger ? 1 : block.usable_size() / t.size;
  if (count == 0 || t.size > block.usable_size()) return {};

  FieldWriter writer(s, names, *ix, block.address(), block.usable_size(), max_rows);
  if (count == 1 && t.kind == DwarfType::Kind::structure && !t.declaration) {
    writer.out.type = first_of_larger ? fmt::format("{} (first of {} bytes)", t.name, block.usable_size()) : t.name;
    writer.members("", id, 0, 0);
  } else if (count == 1) {
    writer.out.type = t.name;
    writer.value("", "", id, 0, 0);
  } else if (is_char(t)) {  // a char[] block: one string when it is text, its characters otherwise
    writer.out.type = t.name + fmt::format("[{}]", count);
    std::vector<std::uint8_t> bytes(std::min<std::uint64_t>(count, kMaxStringBytes + 1));
    const std::size_t n = s.image().read(block.address(), bytes.data(), bytes.size());
    if (std::optional<std::string> text = quoted(bytes.data(), n); text && n == bytes.size()) {
      FieldRow row;
      row.type = writer.out.type;
      row.value = std::move(*text);
      writer.out.rows.push_back(std::move(row));
    } else {
      for (std::uint64_t i = 0; i < count && writer.room(); ++i) {
        const std::string index = fmt::format("[{}]", i);
        writer.value(index, index, id, i * t.size, 0);
      }
    }
  } else {
    writer.out.type = t.name + fmt::format("[{}]", count);
    for (std::uint64_t i = 0; i < count && writer.room(); ++i) {
      const std::string index = fmt::format("[{}]", i);
      writer.value(index, index, id, i * t.size, 0);
    }
  }
  return std::move(writer.out);
}

}  // namespace heapscope
