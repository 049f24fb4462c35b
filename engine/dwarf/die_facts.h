// DieFacts: what the type index asks of one DIE the scanner read (dwarf/die_scanner.h), answered as libdw
// would answer it. An attribute the DIE holds itself, else the one its DW_AT_abstract_origin or
// DW_AT_specification holds, and so on along (libdw's dwarf_attr_integrate, at most 8 DIEs): a concrete
// instance of an inlined function's local, an out-of-line copy of an inline function, a member function
// defined outside its class take their names, types and declarations that way.
//
// The scanner reads those origins in the same unit. libdw answers where it cannot follow: a DIE in
// another unit, or a form the scanner does not follow (ScannedDie::foreign). Asking libdw about a DIE
// makes it parse its unit's abbreviations: for libc6-dbg's ~1,400 such DIEs, spread over its units, that
// cost half a MiB and time on the path of `top`.
#pragma once

#include <elfutils/libdw.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "dwarf/die_scanner.h"

namespace heapscope {

// A variable's static location: DW_OP_addr A, or a TLS offset (DW_OP_const* N; DW_OP_*push_tls_address).
struct StaticLocation {
  bool tls = false;
  std::uint64_t address = 0;
};

// A variable's static location from its DW_AT_location expression; nullopt for any other expression.
std::optional<StaticLocation> static_location(std::span<const std::uint8_t> ops, std::uint8_t address_size);

class DieFacts {
 public:
  // `die` was read by `unit`; both outlive the facts.
  DieFacts(const ScannedDie& die, DieScanner& unit, Dwarf* dwarf) : die_(die), unit_(unit), dwarf_(dwarf) {}

  std::string name() const;
  bool declaration() const;
  std::uint64_t specification() const;  // the DIE's offset, 0 for none
  std::uint64_t type() const;           // likewise
  int language() const;                 // DW_LANG_*, -1 when not given
  // The DIE's own, not taken from an origin (dwarf_attr, as the index reads them).
  std::optional<std::uint64_t> byte_size() const;
  std::optional<StaticLocation> location() const;

 private:
  const ScannedDie& die_;
  DieScanner& unit_;
  Dwarf* dwarf_;
  mutable std::vector<ScannedDie> origins_;  // die_'s origin, its origin's, ... as far as read
  mutable bool origins_end_ = false;         // the scanner cannot read the next one
  mutable std::optional<Dwarf_Die> libdw_;

  // The DIE along die_'s chain of origins that holds an attribute, or null when none does; not `scanned`
  // where the chain leads where the scanner cannot follow: libdw is asked then.
  struct Found {
    bool scanned = true;
    const ScannedDie* die = nullptr;
  };
  template <class Holds>
  Found find(Holds holds) const;
  std::uint64_t reference(std::uint64_t ScannedDie::*attribute, int libdw_attribute) const;
  Dwarf_Die* libdw() const;
};

}  // namespace heapscope
