// A debug file's DWARF as the DIE scanner (dwarf/die_scanner.h) reads it, for the tests that compare the
// scanner's readings with libdw's: every DIE of every unit, parents before children.
#pragma once

#include <catch2/catch.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "dwarf/die_scanner.h"
#include "dwarf/dwarf_file.h"

namespace heapscope::testing {

class ScannedFile {
 public:
  explicit ScannedFile(const std::string& path) {
    std::string error;
    file_ = DwarfFile::open(path, &error);
    INFO(path << ": " << error);
    REQUIRE(file_);
    std::optional<DieSections> sections = DieSections::of(file_->dwarf());
    REQUIRE(sections);
    sections_ = *sections;
  }

  Dwarf* dwarf() const { return file_->dwarf(); }
  const DieSections& sections() const { return sections_; }

  // Calls visit(scanner, unit, die) for each DIE of each unit that a scanner reading `reads` gives, with
  // that unit's scanner (at the DIE: die_at may be asked, next() may not); checks every unit reads whole.
  using Visit = std::function<void(DieScanner&, const DieScanner::Unit&, const ScannedDie&)>;
  void for_each_die(DieScanner::TagFilter reads, const Visit& visit) const {
    for (const DieScanner::Unit& unit : DieScanner::units_of(dwarf(), sections_)) {
      DieScanner scanner(sections_, unit, reads);
      const std::function<void(const ScannedDie&)> walk = [&](const ScannedDie& die) {
        visit(scanner, unit, die);
        ScannedDie child;
        if (die.has_children)
          while (scanner.next(child)) walk(child);
      };
      ScannedDie root;
      if (scanner.next(root)) walk(root);
      CHECK_FALSE(scanner.failed());
    }
  }

 private:
  std::unique_ptr<DwarfFile> file_;
  DieSections sections_;
};

}  // namespace heapscope::testing
