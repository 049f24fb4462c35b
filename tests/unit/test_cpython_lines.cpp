// The line of an instruction by CPython's locations table (3.11+), against what each release itself says:
// the tables and every code unit's line (co_positions()) below were printed by CPython 3.11, 3.12 and 3.13
// for one function (a loop, a try, a comprehension over two lines, a return over two lines, blank lines),
// defined at line 2 of its file:
//
//   def handle(request, retries=3):
//       cache = {}
//       for i in range(retries):
//           try:
//               cache[i] = [x * 2
//                           for x in request]
//           except (KeyError,
//                   ValueError) as e:
//               print(e)
//
//
//       return (cache,
//               len(cache))
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/cpython/cpython_frames.h"

namespace {

std::vector<std::uint8_t> from_hex(const std::string& hex) {
  std::vector<std::uint8_t> out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(static_cast<std::uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

struct Release {
  int minor;
  std::string table;
  std::vector<std::uint32_t> lines;  // per code unit; 0: none
};

}  // namespace

TEST_CASE("cpython locations table: each code unit's line as CPython says it", "[cpython]") {
  const std::vector<Release> releases = {
      {11,
       "8000d80c0e8045dd0d129037895e8c5ef000060515f0000605158801f002050915f00201182af00001182ad82128f00301182af10001182af40001182a8845902189488848f8e51018dd101af00301101cf000020915f000020915f000020915e50c11902189488c48884888488848884888488848f8f8f8f8f005020915f8f8f8f00a000d12dd0c0f9005894a8c4af003010c18f000010518",
       {2, 3, 3, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 5, 6, 6, 7, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 0, 8, 8, 8, 8, 8, 8, 9, 9, 9, 9, 9, 9, 8, 8, 8, 8, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 0, 0, 0, 0, 8, 0, 0, 0, 13, 14, 14, 14, 14, 14, 14, 14, 14, 14, 14, 14, 14, 14, 14, 13, 13}},
      {12,
       "8000d80c0e8045dc0d1290378b5ef2000605158801f002050915e02128f60301182ad81c1df00300191a98419b05f20001182a884590218a48f005060515f012000d12dc0c0f90058b4af003010c18f000010518f9f20f01182af8e41018dc101af00301101cf200020915e40c1190218f488948fbf005020915fa",
       {2, 3, 3, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 5, 7, 6, 6, 6, 6, 6, 6, 6, 7, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 4, 13, 14, 14, 14, 14, 14, 14, 14, 14, 14, 14, 13, 13, 0, 0, 6, 6, 6, 0, 8, 8, 8, 8, 8, 9, 9, 9, 9, 9, 8, 8, 8, 8, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 0, 0, 0, 0, 8, 0, 0, 0}},
      {13,
       "8000d80c0e8045dc0d1290378e5e8801f002050915e12128f30301182ad921289841f00300191a98419c05d92128f10301182a88458b48f105000e1cf012000d12dc0c0f90058b4af003010c18f000010518f9f20f01182af8e41018dc101af00301101cf300020915e40c1190218f488a48fbf005020915fa",
       {2, 3, 3, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 5, 7, 7, 6, 6, 6, 6, 7, 7, 7, 6, 6, 6, 6, 6, 6, 6, 7, 7, 6, 6, 6, 6, 6, 6, 6, 4, 4, 13, 14, 14, 14, 14, 14, 14, 14, 14, 14, 14, 13, 13, 0, 0, 6, 6, 6, 0, 8, 8, 8, 8, 8, 9, 9, 9, 9, 9, 8, 8, 8, 8, 8, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 0, 0, 0, 0, 8, 0, 0, 0}},
  };
  for (const Release& r : releases) {
    INFO("3." << r.minor);
    const std::vector<std::uint8_t> table = from_hex(r.table);
    for (std::size_t unit = 0; unit < r.lines.size(); ++unit) {
      INFO("code unit " << unit);
      CHECK(heapscope::cpython::line_of_instruction(table, 2, static_cast<std::int64_t>(unit)) == r.lines[unit]);
    }
    CHECK(heapscope::cpython::line_of_instruction(table, 2, static_cast<std::int64_t>(r.lines.size())) == 0);
  }
}

TEST_CASE("cpython locations table: a table this does not read gives no line", "[cpython]") {
  const std::vector<std::uint8_t> not_an_entry = {0x12, 0x80};
  CHECK(heapscope::cpython::line_of_instruction(not_an_entry, 2, 0) == 0);
  CHECK(heapscope::cpython::line_of_instruction({}, 2, 0) == 0);
}
