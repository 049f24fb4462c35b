// A DWARF-typed block field by field, with values, the way gdb's `print *p` shows an object: members (base
// classes as "<base Name>" groups), nested structures and arrays one level deeper, integers and enums in
// decimal, chars as number and character, char arrays as strings when printable, floating point, pointers
// in hex with what they point to. A block holding several objects of its type shows them as [0], [1], ...
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "reports/graph_reports.h"
#include "session/session.h"

namespace heapscope {

inline constexpr std::size_t kDefaultFieldRows = 32;

struct BlockFields {
  std::string type;  // "node", "record[24576]" for a block holding several; empty when the block is untyped
  std::vector<FieldRow> rows;
  bool truncated = false;  // there were more than `max_rows`
};

// The fields of block `b` as its DWARF type lays them out (from DwarfTypes, or for a block named by its
// vtable, the DWARF structure of that name); no rows when DWARF gives it no type.
BlockFields block_fields(Session& s, const BlockNames& names, BlockId b, std::size_t max_rows);

// What the word `value` points to: "block 0x… (Node, 24 bytes)", "block 0x…+0x10 (…)", a module's symbol
// ("global g in app"); empty when it points to nothing heapscope can name.
std::string pointer_target(Session& s, const BlockNames& names, Address value);
// The same for a value already looked up in the graph's block index: `to`, or kNoBlock when it is in none.
std::string pointer_target(Session& s, const BlockNames& names, Address value, BlockId to);

}  // namespace heapscope
