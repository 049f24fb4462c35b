// Taking C++ names apart (demangled or as DWARF spells them).
#pragma once

#include <string>
#include <vector>

namespace heapscope {

// The arguments of the template whose '>' is at `end - 1`, split at top-level commas: not those inside
// nested templates, nor those between the parentheses of a function type or of the function a lambda is
// local to ("f(int, long)::{lambda()#1}"). Leading spaces are trimmed. Empty when s[end - 1] is no '>' or
// the brackets do not balance.
//   ("std::map<int, std::pair<int, long> >", 36) → {"int", "std::pair<int, long> "}
std::vector<std::string> template_arguments_ending_at(const std::string& s, std::size_t end);

}  // namespace heapscope
