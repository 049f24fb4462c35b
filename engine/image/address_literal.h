// Address literals as every frontend reads them: 0x-prefixed hex, or decimal (0-prefixed octal too, as C
// and the debuggers read it); no sign, no trailing text. A debugger frontend tries this before handing the
// text to its expression evaluator.
#pragma once

#include <optional>
#include <string_view>

#include "image/image.h"

namespace heapscope {

std::optional<Address> parse_address_literal(std::string_view text);

}  // namespace heapscope
