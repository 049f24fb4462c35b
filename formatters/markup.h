// Escaping shared by the markup formats: HTML pages and SVG charts are both XML-escaped text.
#pragma once

#include <string>
#include <string_view>

namespace heapscope {

// Text made safe inside an element or a double- or single-quoted attribute: & < > " ' become entities.
std::string markup_escape(std::string_view text);

}  // namespace heapscope
