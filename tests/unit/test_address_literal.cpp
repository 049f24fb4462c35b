// Address literals (image/address_literal.h): one parser for the CLI's and every debugger's numbers.
#include <catch2/catch.hpp>

#include "image/address_literal.h"

using heapscope::parse_address_literal;

TEST_CASE("address literals: hex, decimal and octal, nothing else") {
  CHECK(parse_address_literal("0x7fa4fc000ff0") == 0x7fa4fc000ff0u);
  CHECK(parse_address_literal("0X10") == 16u);
  CHECK(parse_address_literal("4096") == 4096u);
  CHECK(parse_address_literal("010") == 8u);
  CHECK(parse_address_literal("0") == 0u);
  CHECK(parse_address_literal("0xffffffffffffffff") == ~0ull);
  for (const char* bad : {"", "-1", "+1", "0x", "0x-1", "12abc", "0x1g", " 1", "1 ", "0x10000000000000000", "p"})
    CHECK_FALSE(parse_address_literal(bad).has_value());
}
