#include "dwarf/die_scanner.h"

#include <dwarf.h>
#include <gelf.h>
#include <libelf.h>

#include <cstring>
#include <string_view>

namespace heapscope {

namespace {

constexpr std::uint16_t kFormGnuAddrIndex = 0x1f01, kFormGnuStrIndex = 0x1f02, kFormGnuRefAlt = 0x1f20,
                        kFormGnuStrpAlt = 0x1f21;

std::span<const std::uint8_t> bytes_of(Elf_Scn* scn) {
  Elf_Data* data = elf_getdata(scn, nullptr);
  if (!data || !data->d_buf) return {};
  return {static_cast<const std::uint8_t*>(data->d_buf), data->d_size};
}

}  // namespace

std::optional<DieSections> DieSections::of(Dwarf* dwarf) {
  Elf* elf = dwarf ? dwarf_getelf(dwarf) : nullptr;
  GElf_Ehdr header;
  std::size_t names = 0;
  // The scanner reads little-endian values as the host does (x86-64, as every image heapscope reads).
  if (!elf || !gelf_getehdr(elf, &header) || header.e_ident[EI_DATA] != ELFDATA2LSB ||
      elf_getshdrstrndx(elf, &names) != 0)
    return std::nullopt;
  DieSections s;
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr shdr;
    const char* raw_name = gelf_getshdr(scn, &shdr) ? elf_strptr(elf, names, shdr.sh_name) : nullptr;
    if (!raw_name || shdr.sh_type == SHT_NOBITS) continue;
    std::string_view name = raw_name;
    // libdw inflated compressed sections in place when it opened the file (GNU's .zdebug_ ones too).
    if (name.starts_with(".zdebug_")) name.remove_prefix(2);
    else if (name.starts_with(".debug_")) name.remove_prefix(1);
    else continue;
    std::span<const std::uint8_t>* slot = name == "debug_info"          ? &s.info
                                          : name == "debug_abbrev"      ? &s.abbrev
                                          : name == "debug_str"         ? &s.str
                                          : name == "debug_line_str"    ? &s.line_str
                                          : name == "debug_str_offsets" ? &s.str_offsets
                                                                        : nullptr;
    if (!slot) continue;
    if (shdr.sh_flags & SHF_COMPRESSED) return std::nullopt;
    *slot = bytes_of(scn);
    if (slot->size() >= 4 && std::memcmp(slot->data(), "ZLIB", 4) == 0) return std::nullopt;
  }
  if (s.info.empty() || s.abbrev.empty()) return std::nullopt;
  return s;
}

// Bounded reads: past the end, a read gives 0 and marks the reader bad.
struct DieScanner::Reader {
  const std::uint8_t* data;
  std::uint64_t pos, end;
  bool bad = false;

  bool need(std::uint64_t n) {
    if (end - pos >= n) return true;
    bad = true;
    pos = end;
    return false;
  }
  void skip(std::uint64_t n) {
    if (need(n)) pos += n;
  }
  std::uint64_t fixed(unsigned n) {
    std::uint64_t v = 0;
    if (!need(n)) return 0;
    std::memcpy(&v, data + pos, n);  // little-endian, as DieSections::of checked
    pos += n;
    return v;
  }
  std::uint64_t uleb() {
    std::uint64_t v = 0;
    for (unsigned shift = 0; pos < end; shift += 7) {
      const std::uint8_t byte = data[pos++];
      if (shift < 64) v |= std::uint64_t{byte & 0x7fu} << shift;
      if (!(byte & 0x80)) return v;
    }
    bad = true;
    return 0;
  }
  std::int64_t sleb() {
    std::uint64_t v = 0;
    unsigned shift = 0;
    while (pos < end) {
      const std::uint8_t byte = data[pos++];
      if (shift < 64) v |= std::uint64_t{byte & 0x7fu} << shift;
      shift += 7;
      if (!(byte & 0x80)) {
        if (shift < 64 && (byte & 0x40)) v |= ~std::uint64_t{0} << shift;
        return static_cast<std::int64_t>(v);
      }
    }
    bad = true;
    return 0;
  }
  const char* cstr() {
    const void* nul = pos < end ? std::memchr(data + pos, 0, end - pos) : nullptr;
    if (!nul) {
      bad = true;
      pos = end;
      return nullptr;
    }
    const char* s = reinterpret_cast<const char*>(data + pos);
    pos = static_cast<const std::uint8_t*>(nul) - data + 1;
    return s;
  }
};

std::vector<DieScanner::Unit> DieScanner::units_of(Dwarf* dwarf, const DieSections& sections) {
  std::vector<Unit> units;
  Dwarf_Off offset = 0, next = 0, abbrev_offset = 0;
  std::size_t header_size = 0;
  Dwarf_Half version = 0;
  std::uint8_t address_size = 0, offset_size = 0;
  while (dwarf_next_unit(dwarf, offset, &next, &header_size, &version, &abbrev_offset, &address_size,
                         &offset_size, nullptr, nullptr) == 0) {
    units.push_back({offset, std::min<std::uint64_t>(next, sections.info.size()), offset + header_size, version,
                     abbrev_offset, address_size, offset_size});
    offset = next;
  }
  return units;
}

void DieScanner::for_each_unit(Dwarf* dwarf, const DieSections& sections, TagFilter reads_tag,
                               const std::function<void(DieScanner&)>& scan) {
  for (const Unit& unit : units_of(dwarf, sections)) {
    DieScanner scanner(sections, unit, reads_tag);
    scan(scanner);
  }
}

DieScanner::DieScanner(const DieSections& sections, const Unit& unit, TagFilter reads_tag)
    : sections_(sections), unit_(unit), reads_tag_(reads_tag) {
  pos_ = unit_.root;
  // A DWARF 5 unit without DW_AT_str_offsets_base reads the first table, past its header.
  if (unit_.version >= 5) str_offsets_base_ = unit_.offset_size == 8 ? 16 : 8;
  read_abbrevs();
}

std::optional<std::uint32_t> DieScanner::fixed_size(std::uint16_t form) const {
  switch (form) {
    case DW_FORM_flag_present: case DW_FORM_implicit_const:
      return 0;
    case DW_FORM_data1: case DW_FORM_ref1: case DW_FORM_flag: case DW_FORM_strx1: case DW_FORM_addrx1:
      return 1;
    case DW_FORM_data2: case DW_FORM_ref2: case DW_FORM_strx2: case DW_FORM_addrx2:
      return 2;
    case DW_FORM_strx3: case DW_FORM_addrx3:
      return 3;
    case DW_FORM_data4: case DW_FORM_ref4: case DW_FORM_ref_sup4: case DW_FORM_strx4: case DW_FORM_addrx4:
      return 4;
    case DW_FORM_data8: case DW_FORM_ref8: case DW_FORM_ref_sig8: case DW_FORM_ref_sup8:
      return 8;
    case DW_FORM_data16:
      return 16;
    case DW_FORM_addr:
      return unit_.address_size;
    case DW_FORM_ref_addr:
      return unit_.version <= 2 ? unit_.address_size : unit_.offset_size;
    case DW_FORM_strp: case DW_FORM_line_strp: case DW_FORM_sec_offset: case DW_FORM_strp_sup:
    case kFormGnuRefAlt: case kFormGnuStrpAlt:
      return unit_.offset_size;
    default:
      return std::nullopt;
  }
}

namespace {

bool asked_about(std::uint64_t attribute) {
  switch (attribute) {
    case DW_AT_name: case DW_AT_specification: case DW_AT_abstract_origin: case DW_AT_type: case DW_AT_sibling:
    case DW_AT_declaration: case DW_AT_byte_size: case DW_AT_language: case DW_AT_location:
    case DW_AT_str_offsets_base:
      return true;
    default:
      return false;
  }
}

}  // namespace

// Abbreviation codes are small and dense in what compilers write (abbrevs_), but any code reads
// (sparse_abbrevs_).
void DieScanner::read_abbrevs() {
  Reader r{sections_.abbrev.data(), unit_.abbrev_offset, sections_.abbrev.size()};
  if (unit_.abbrev_offset >= sections_.abbrev.size()) r.bad = true;
  while (!r.bad) {
    const std::uint64_t code = r.uleb();
    if (code == 0 || r.bad) break;
    const std::uint64_t tag = r.uleb();
    const bool children = r.fixed(1) != 0;
    if (r.bad) break;
    if (code < kDenseCodes && code >= abbrevs_.size()) abbrevs_.resize(code + 1);
    const bool read = reads_tag_(static_cast<int>(tag));
    Abbrev& a = code < kDenseCodes ? abbrevs_[code] : sparse_abbrevs_[code];
    a = Abbrev{static_cast<int>(tag), children, static_cast<std::uint32_t>(steps_.size()), 0, true};
    for (;;) {
      const std::uint64_t attribute = r.uleb(), form = r.uleb();
      if (r.bad || (attribute == 0 && form == 0)) break;
      const std::int64_t implicit = form == DW_FORM_implicit_const ? r.sleb() : 0;
      const std::optional<std::uint32_t> size = fixed_size(static_cast<std::uint16_t>(form));
      const bool asked = attribute == DW_AT_sibling || (read && asked_about(attribute));
      if (!asked && size && form <= 0xffff) {
        if (a.count > 0 && steps_.back().attribute == 0) {
          steps_.back().skip += *size;
        } else {
          steps_.push_back(Step{0, 0, *size, 0});
          ++a.count;
        }
        continue;
      }
      if (attribute > 0xffff || form > 0xffff) {
        r.bad = true;
        break;
      }
      steps_.push_back(Step{static_cast<std::uint16_t>(attribute == 0 ? 0xffff : attribute),
                            static_cast<std::uint16_t>(form), 0, implicit});
      ++a.count;
    }
  }
  failed_ = r.bad;
}

const DieScanner::Abbrev* DieScanner::abbrev_of(std::uint64_t code) const {
  if (code < abbrevs_.size()) return abbrevs_[code].defined ? &abbrevs_[code] : nullptr;
  if (code < kDenseCodes) return nullptr;
  const auto it = sparse_abbrevs_.find(code);
  return it == sparse_abbrevs_.end() ? nullptr : &it->second;
}

const char* DieScanner::string_at(std::span<const std::uint8_t> section, std::uint64_t offset) const {
  if (offset >= section.size()) return "";  // libdw would find no string: the name is empty
  // A string section ends with a NUL, so every string in it ends: only a damaged one needs the search.
  if (section.back() == 0) return reinterpret_cast<const char*>(section.data() + offset);
  const void* nul = std::memchr(section.data() + offset, 0, section.size() - offset);
  return nul ? reinterpret_cast<const char*>(section.data() + offset) : "";
}

const char* DieScanner::indexed_string(std::uint64_t index) const {
  const std::uint64_t at = str_offsets_base_ + index * unit_.offset_size;
  if (index > sections_.str_offsets.size() || at + unit_.offset_size > sections_.str_offsets.size()) return "";
  std::uint64_t offset = 0;
  std::memcpy(&offset, sections_.str_offsets.data() + at, unit_.offset_size);
  return string_at(sections_.str, offset);
}

// DW_FORM_indirect's form, read where the value would be; nullopt for one that cannot be (another
// indirection, an implicit constant, which keeps its value in the abbreviation, or no form at all).
std::optional<std::uint16_t> DieScanner::indirect_form(Reader& r) {
  const std::uint64_t form = r.uleb();
  if (r.bad || form == DW_FORM_indirect || form == DW_FORM_implicit_const || form > 0xffff) return std::nullopt;
  return static_cast<std::uint16_t>(form);
}

bool DieScanner::skip_form(Reader& r, std::uint16_t form) {
  if (const std::optional<std::uint32_t> size = fixed_size(form)) {
    r.skip(*size);
    return !r.bad;
  }
  switch (form) {
    case DW_FORM_string: r.cstr(); break;
    case DW_FORM_block1: r.skip(r.fixed(1)); break;
    case DW_FORM_block2: r.skip(r.fixed(2)); break;
    case DW_FORM_block4: r.skip(r.fixed(4)); break;
    case DW_FORM_block: case DW_FORM_exprloc: r.skip(r.uleb()); break;
    case DW_FORM_udata: case DW_FORM_ref_udata: case DW_FORM_strx: case DW_FORM_addrx: case DW_FORM_loclistx:
    case DW_FORM_rnglistx: case kFormGnuAddrIndex: case kFormGnuStrIndex:
      r.uleb();
      break;
    case DW_FORM_sdata: r.sleb(); break;
    case DW_FORM_indirect: {
      const std::optional<std::uint16_t> actual = indirect_form(r);
      return actual && skip_form(r, *actual);
    }
    default: return false;  // a form DWARF does not define: nothing after it can be found
  }
  return !r.bad;
}

// An attribute's value, as far as the index uses it.
struct DieScanner::Value {
  enum class Kind { constant, flag, reference, string, string_index, block, other, foreign } kind = Kind::other;
  std::uint64_t number = 0;
  const char* string = nullptr;
  std::span<const std::uint8_t> block;
};

bool DieScanner::read_attribute(Reader& r, const Step& step, ScannedDie& die) {
  const std::optional<Value> v = read_value(r, step.form, step.implicit);
  if (!v) return false;
  keep(step.attribute, *v, die);
  return true;
}

std::optional<DieScanner::Value> DieScanner::read_value(Reader& r, std::uint16_t form, std::int64_t implicit) {
  if (form == DW_FORM_indirect) {
    const std::optional<std::uint16_t> actual = indirect_form(r);
    if (!actual) return std::nullopt;
    form = *actual;
  }
  Value v;
  using K = Value::Kind;
  auto block = [&](std::uint64_t size) {
    v.kind = K::block;
    if (r.need(size)) v.block = {r.data + r.pos, size};
    r.skip(size);
  };
  switch (form) {
    case DW_FORM_data1: v.kind = K::constant; v.number = r.fixed(1); break;
    case DW_FORM_data2: v.kind = K::constant; v.number = r.fixed(2); break;
    case DW_FORM_data4: v.kind = K::constant; v.number = r.fixed(4); break;
    case DW_FORM_data8: v.kind = K::constant; v.number = r.fixed(8); break;
    case DW_FORM_udata: v.kind = K::constant; v.number = r.uleb(); break;
    case DW_FORM_sdata: v.kind = K::constant; v.number = static_cast<std::uint64_t>(r.sleb()); break;
    case DW_FORM_implicit_const: v.kind = K::constant; v.number = static_cast<std::uint64_t>(implicit); break;
    case DW_FORM_flag: v.kind = K::flag; v.number = r.fixed(1); break;
    case DW_FORM_flag_present: v.kind = K::flag; v.number = 1; break;
    case DW_FORM_ref1: v.kind = K::reference; v.number = unit_.offset + r.fixed(1); break;
    case DW_FORM_ref2: v.kind = K::reference; v.number = unit_.offset + r.fixed(2); break;
    case DW_FORM_ref4: v.kind = K::reference; v.number = unit_.offset + r.fixed(4); break;
    case DW_FORM_ref8: v.kind = K::reference; v.number = unit_.offset + r.fixed(8); break;
    case DW_FORM_ref_udata: v.kind = K::reference; v.number = unit_.offset + r.uleb(); break;
    case DW_FORM_ref_addr: v.kind = K::reference; v.number = r.fixed(*fixed_size(form)); break;
    case DW_FORM_string: v.kind = K::string; v.string = r.cstr(); break;
    case DW_FORM_strp: v.kind = K::string; v.string = string_at(sections_.str, r.fixed(unit_.offset_size)); break;
    case DW_FORM_line_strp:
      v.kind = K::string;
      v.string = string_at(sections_.line_str, r.fixed(unit_.offset_size));
      break;
    case DW_FORM_strx: v.kind = K::string_index; v.number = r.uleb(); break;
    case DW_FORM_strx1: v.kind = K::string_index; v.number = r.fixed(1); break;
    case DW_FORM_strx2: v.kind = K::string_index; v.number = r.fixed(2); break;
    case DW_FORM_strx3: v.kind = K::string_index; v.number = r.fixed(3); break;
    case DW_FORM_strx4: v.kind = K::string_index; v.number = r.fixed(4); break;
    case DW_FORM_exprloc: case DW_FORM_block: block(r.uleb()); break;
    case DW_FORM_block1: block(r.fixed(1)); break;
    case DW_FORM_block2: block(r.fixed(2)); break;
    case DW_FORM_block4: block(r.fixed(4)); break;
    case DW_FORM_sec_offset: v.kind = K::other; v.number = r.fixed(unit_.offset_size); break;
    case DW_FORM_ref_sig8: case DW_FORM_ref_sup4: case DW_FORM_ref_sup8: case DW_FORM_strp_sup:
    case kFormGnuRefAlt: case kFormGnuStrpAlt: case kFormGnuStrIndex:
      v.kind = K::foreign;
      if (!skip_form(r, form)) return std::nullopt;
      break;
    default:
      if (!skip_form(r, form)) return std::nullopt;
      break;
  }
  if (r.bad) return std::nullopt;
  return v;
}

// Keeps what the index asks of attribute `attribute` with value `v` in `die`.
void DieScanner::keep(std::uint16_t attribute, const Value& v, ScannedDie& die) {
  using K = Value::Kind;
  const bool foreign = v.kind == K::foreign;
  switch (attribute) {
    case DW_AT_name:
      if (foreign) die.foreign = true;
      else if (v.kind == K::string) die.name = v.string ? v.string : "";
      else if (v.kind == K::string_index) name_index_ = v.number;  // resolved in read_die()
      else die.name = "";  // not a string: libdw would give none
      break;
    case DW_AT_specification:
    case DW_AT_abstract_origin:
    case DW_AT_type:
    case DW_AT_sibling:
      if (foreign) {
        if (attribute != DW_AT_sibling) die.foreign = true;
        break;
      }
      if (v.kind != K::reference) break;
      if (attribute == DW_AT_specification) die.specification = v.number;
      if (attribute == DW_AT_type) die.type = v.number;
      if (attribute == DW_AT_sibling) die.sibling = v.number;
      if (attribute == DW_AT_abstract_origin || (attribute == DW_AT_specification && !die.origin))
        die.origin = v.number;
      break;
    case DW_AT_declaration: die.declaration = v.kind == K::flag && v.number != 0; break;
    case DW_AT_byte_size:
      if (v.kind == K::constant) die.byte_size = v.number;
      break;
    case DW_AT_language:
      if (v.kind == K::constant) die.language = v.number;
      break;
    case DW_AT_location:
      if (v.kind == K::block) die.location = v.block;
      break;
    case DW_AT_str_offsets_base:
      if (v.kind == K::other || v.kind == K::constant) str_offsets_base_ = v.number;
      break;
    default: break;
  }
}

bool DieScanner::next(ScannedDie& die) {
  if (failed_ || pos_ >= unit_.end) return false;
  Reader r{sections_.info.data(), pos_, unit_.end};
  const std::optional<bool> read = read_die(r, die);
  if (!read) {
    failed_ = true;
    return false;
  }
  pos_ = r.pos;
  return *read;
}

std::optional<ScannedDie> DieScanner::die_at(std::uint64_t offset) {
  if (failed_ || offset < unit_.root || offset >= unit_.end) return std::nullopt;
  Reader r{sections_.info.data(), offset, unit_.end};
  ScannedDie die;
  if (read_die(r, die) != std::optional<bool>(true) || !reads_tag_(die.tag)) return std::nullopt;
  return die;
}

std::optional<bool> DieScanner::read_die(Reader& r, ScannedDie& die) {
  const std::uint64_t offset = r.pos;
  const std::uint64_t code = r.uleb();
  if (code == 0 && !r.bad) return false;
  const Abbrev* abbrev = r.bad ? nullptr : abbrev_of(code);
  if (!abbrev) return std::nullopt;
  const Abbrev& a = *abbrev;
  static constexpr ScannedDie kUnread{};  // copied: zeroing in place compiles to a slow `rep stos`
  die = kUnread;
  name_index_.reset();
  die.offset = offset;
  die.tag = a.tag;
  die.has_children = a.children;
  for (std::uint32_t i = a.first; i < a.first + a.count; ++i) {
    const Step& step = steps_[i];
    if (step.attribute == 0) r.skip(step.skip);
    else if (!read_attribute(r, step, die)) return std::nullopt;
  }
  if (r.bad) return std::nullopt;
  // A name given by index into the string offsets is resolved once the whole DIE is read: a unit's root
  // may give its DW_AT_str_offsets_base after its DW_AT_name.
  if (name_index_) die.name = indexed_string(*name_index_);
  return true;
}

void DieScanner::skip_children(const ScannedDie& die) {
  if (!die.has_children || failed_) return;
  if (die.sibling > pos_ && die.sibling <= unit_.end) {
    pos_ = die.sibling;
    return;
  }
  Reader r{sections_.info.data(), pos_, unit_.end};
  for (std::uint64_t depth = 1; depth > 0;) {
    const std::uint64_t code = r.uleb();
    if (code == 0 && !r.bad) {
      --depth;
      continue;
    }
    const Abbrev* a = r.bad ? nullptr : abbrev_of(code);
    if (!a) {
      failed_ = true;
      return;
    }
    for (std::uint32_t i = a->first; i < a->first + a->count; ++i) {
      const Step& step = steps_[i];
      if (step.attribute == 0) r.skip(step.skip);
      else if (!skip_form(r, step.form)) r.bad = true;
    }
    if (r.bad) {
      failed_ = true;
      return;
    }
    if (a->children) ++depth;
  }
  pos_ = r.pos;
}

}  // namespace heapscope
