#include "dwarf/die_facts.h"

#include <dwarf.h>

#include <cstring>

#include "dwarf/dwarf_file.h"

namespace heapscope {

namespace {

// DW_AT_location's expression as libdw reads it; empty for none, or a location list.
std::span<const std::uint8_t> location_bytes(Dwarf_Die& variable) {
  Dwarf_Attribute attr;
  Dwarf_Block block;
  if (!dwarf_attr(&variable, DW_AT_location, &attr) || dwarf_formblock(&attr, &block) != 0) return {};
  return {block.data, block.length};
}

}  // namespace

std::optional<StaticLocation> static_location(std::span<const std::uint8_t> ops, std::uint8_t address_size) {
  if (ops.empty()) return std::nullopt;
  if (ops[0] == DW_OP_addr && ops.size() == 1u + address_size) {
    std::uint64_t address = 0;
    std::memcpy(&address, ops.data() + 1, address_size);
    return StaticLocation{false, address};
  }
  const std::uint8_t last = ops.back();
  if (last != DW_OP_GNU_push_tls_address && last != DW_OP_form_tls_address) return std::nullopt;
  const std::span<const std::uint8_t> operand = ops.subspan(1, ops.size() - 2);
  std::uint64_t offset = 0;
  if (ops[0] == DW_OP_const4u || ops[0] == DW_OP_const8u) {
    if (operand.size() != (ops[0] == DW_OP_const4u ? 4u : 8u)) return std::nullopt;
    std::memcpy(&offset, operand.data(), operand.size());
    return StaticLocation{true, offset};
  }
  if (ops[0] != DW_OP_constu || operand.empty() || operand.size() > 10) return std::nullopt;
  for (std::size_t i = 0; i < operand.size(); ++i) {
    const bool more = operand[i] & 0x80;
    if (more != (i + 1 < operand.size())) return std::nullopt;  // the ULEB128 must fill the operand exactly
    if (i < 10) offset |= std::uint64_t{operand[i] & 0x7fu} << (7 * i);
  }
  return StaticLocation{true, offset};
}

template <class Holds>
DieFacts::Found DieFacts::find(Holds holds) const {
  constexpr std::size_t kChain = 8;  // dwarf_attr_integrate's limit
  const ScannedDie* d = &die_;
  for (std::size_t i = 0;; ++i) {
    if (d->foreign) return {false, nullptr};
    if (holds(*d)) return {true, d};
    if (!d->origin || i + 1 == kChain) return {true, nullptr};
    if (origins_.size() == i && !origins_end_) {
      origins_.reserve(kChain);  // `d` points into it
      if (std::optional<ScannedDie> next = unit_.die_at(d->origin)) origins_.push_back(*next);
      else origins_end_ = true;
    }
    if (i >= origins_.size()) return {false, nullptr};
    d = &origins_[i];
  }
}

std::string DieFacts::name() const {
  if (const Found f = find([](const ScannedDie& d) { return d.name != nullptr; }); f.scanned)
    return f.die ? f.die->name : "";
  Dwarf_Die* d = libdw();
  return d ? die_name(*d) : "";
}

bool DieFacts::declaration() const {
  if (const Found f = find([](const ScannedDie& d) { return d.declaration.has_value(); }); f.scanned)
    return f.die && *f.die->declaration;
  Dwarf_Die* d = libdw();
  return d && die_flag(*d, DW_AT_declaration);
}

std::uint64_t DieFacts::specification() const { return reference(&ScannedDie::specification, DW_AT_specification); }

std::uint64_t DieFacts::type() const { return reference(&ScannedDie::type, DW_AT_type); }

int DieFacts::language() const {
  if (const Found f = find([](const ScannedDie& d) { return d.language.has_value(); }); f.scanned)
    return f.die ? static_cast<int>(*f.die->language) : -1;
  Dwarf_Die* d = libdw();
  return d ? dwarf_srclang(d) : -1;
}

std::optional<std::uint64_t> DieFacts::byte_size() const {
  if (!die_.foreign) return die_.byte_size;
  Dwarf_Die* d = libdw();
  return d ? die_udata(*d, DW_AT_byte_size) : std::nullopt;
}

std::optional<StaticLocation> DieFacts::location() const {
  if (!die_.foreign) return static_location(die_.location, unit_.address_size());
  Dwarf_Die* d = libdw();
  return d ? static_location(location_bytes(*d), unit_.address_size()) : std::nullopt;
}

std::uint64_t DieFacts::reference(std::uint64_t ScannedDie::*attribute, int libdw_attribute) const {
  if (const Found f = find([&](const ScannedDie& d) { return d.*attribute != 0; }); f.scanned)
    return f.die ? f.die->*attribute : 0;
  Dwarf_Die* d = libdw();
  std::optional<Dwarf_Die> target = d ? die_reference(*d, libdw_attribute) : std::nullopt;
  return target ? dwarf_dieoffset(&*target) : 0;
}

Dwarf_Die* DieFacts::libdw() const {
  if (!libdw_) {
    Dwarf_Die d;
    if (!dwarf_offdie(dwarf_, die_.offset, &d)) return nullptr;
    libdw_ = d;
  }
  return &*libdw_;
}

}  // namespace heapscope
