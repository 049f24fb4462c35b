// DieScanner: the DIEs of one unit decoded straight from .debug_info's bytes, in order, for the type
// index's pass over every DIE of a module (dwarf/type_index).
//
// Why not libdw's dwarf_child/dwarf_siblingof for that pass: libdw 0.188 looks every DIE's abbreviation up
// in a hash table it guards with a read-write lock, and decodes the attributes a DIE is asked for one by
// one, each from the abbreviation's start. Over libc6-dbg's 1.35 million DIEs, of which the index keeps a
// few thousand, that was most of the index's time, and the index lies on the path of `top` and of a
// debugger's first naming. The scanner decodes a unit's abbreviations once, skips what nobody asks for by
// its form's size, and reads only the attributes the index needs, as the DIE itself holds them. libdw
// still answers every other question, and those about a DIE whose attributes the scanner cannot follow
// (another file's references and strings, type units' signatures): ScannedDie::foreign.
#pragma once

#include <elfutils/libdw.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

namespace heapscope {

// The section bytes DIEs are decoded from; empty spans for the sections a file does not have.
struct DieSections {
  std::span<const std::uint8_t> info, abbrev, str, line_str, str_offsets;
  // Nullopt when the file has no .debug_info or .debug_abbrev to read, or they are still compressed.
  static std::optional<DieSections> of(Dwarf* dwarf);
};

// One DIE's attributes the type index asks about, as the DIE itself holds them: not followed through
// DW_AT_abstract_origin or DW_AT_specification the way libdw's dwarf_attr_integrate does (`origin` is
// where it would go). DIE offsets are .debug_info offsets, as dwarf_dieoffset gives them; 0 is none.
struct ScannedDie {
  std::uint64_t offset = 0;
  int tag = 0;
  bool has_children = false;
  const char* name = nullptr;  // DW_AT_name
  std::uint64_t specification = 0;
  std::uint64_t origin = 0;  // DW_AT_abstract_origin, else DW_AT_specification
  std::uint64_t type = 0;
  std::uint64_t sibling = 0;
  std::optional<bool> declaration;
  std::optional<std::uint64_t> byte_size;  // as an unsigned constant
  std::optional<std::uint64_t> language;
  std::span<const std::uint8_t> location;  // DW_AT_location as one expression; empty for none or a list
  bool foreign = false;  // one of the attributes above is in a form the scanner does not follow
};

class DieScanner {
 public:
  struct Unit {
    std::uint64_t offset = 0, end = 0;  // the unit's header and one past its last byte
    std::uint64_t root = 0;             // its first DIE
    std::uint16_t version = 0;
    std::uint64_t abbrev_offset = 0;
    std::uint8_t address_size = 8, offset_size = 4;
  };

  // The tags whose DIEs the caller reads; of any other DIE only its tag, children and sibling are read.
  using TagFilter = bool (*)(int tag);

  // The units of .debug_info, in order, as dwarf_next_unit finds them.
  static std::vector<Unit> units_of(Dwarf* dwarf, const DieSections& sections);
  // Calls `scan` with a scanner at the root of each of them.
  static void for_each_unit(Dwarf* dwarf, const DieSections& sections, TagFilter reads_tag,
                            const std::function<void(DieScanner&)>& scan);

  DieScanner(const DieSections& sections, const Unit& unit, TagFilter reads_tag);

  // The next DIE of the current list of siblings: false at the list's end (its null entry, which it
  // consumes), at the unit's end, and when the bytes do not decode (failed()). After a DIE with children,
  // the next call gives its first child, unless skip_children() was called.
  bool next(ScannedDie& die);
  // Moves past the children of `die`, the DIE next() gave last.
  void skip_children(const ScannedDie& die);
  // The DIE at `offset` in this unit, read as next() would read it, without moving: nullopt when the
  // offset lies outside the unit's DIEs, its bytes do not decode, or its tag is not one the caller reads
  // (of which the scanner keeps no attributes).
  std::optional<ScannedDie> die_at(std::uint64_t offset);
  bool failed() const { return failed_; }
  std::uint8_t address_size() const { return unit_.address_size; }

 private:
  // One attribute of an abbreviation, or a run of attributes of fixed sizes nobody asks about (skip bytes).
  struct Step {
    std::uint16_t attribute = 0;  // 0: a run to skip
    std::uint16_t form = 0;
    std::uint32_t skip = 0;
    std::int64_t implicit = 0;  // DW_FORM_implicit_const's value
  };
  struct Abbrev {
    int tag = 0;
    bool children = false;
    std::uint32_t first = 0, count = 0;  // its steps
    bool defined = false;
  };
  struct Reader;
  struct Value;

  const DieSections& sections_;
  Unit unit_;
  TagFilter reads_tag_;
  std::uint64_t pos_ = 0;  // in .debug_info
  std::uint64_t str_offsets_base_ = 0;
  std::optional<std::uint64_t> name_index_;  // the DIE being read names itself by a string index
  bool failed_ = false;
  // By code: the codes a producer numbers from 1 in a vector, any others (a damaged or odd table's) in a
  // map, so that one large code costs one entry, not a vector that long in every unit that reads it.
  static constexpr std::uint64_t kDenseCodes = 4096;
  std::vector<Abbrev> abbrevs_;
  std::unordered_map<std::uint64_t, Abbrev> sparse_abbrevs_;
  std::vector<Step> steps_;

  void read_abbrevs();
  // Decodes the DIE at r.pos: false for the null entry that ends a list of siblings, nullopt when its
  // bytes do not decode.
  std::optional<bool> read_die(Reader& r, ScannedDie& die);
  std::optional<std::uint32_t> fixed_size(std::uint16_t form) const;
  bool read_attribute(Reader& r, const Step& step, ScannedDie& die);
  std::optional<Value> read_value(Reader& r, std::uint16_t form, std::int64_t implicit);
  void keep(std::uint16_t attribute, const Value& v, ScannedDie& die);
  const Abbrev* abbrev_of(std::uint64_t code) const;  // null for a code the unit's table does not define
  bool skip_form(Reader& r, std::uint16_t form);
  static std::optional<std::uint16_t> indirect_form(Reader& r);
  const char* string_at(std::span<const std::uint8_t> section, std::uint64_t offset) const;
  const char* indexed_string(std::uint64_t index) const;
};

}  // namespace heapscope
