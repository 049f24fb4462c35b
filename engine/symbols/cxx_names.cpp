#include "symbols/cxx_names.h"

#include <algorithm>

namespace heapscope {

std::vector<std::string> template_arguments_ending_at(const std::string& s, std::size_t end) {
  if (end == 0 || s[end - 1] != '>') return {};
  int depth = 0, parens = 0;
  std::size_t i = end - 1;
  std::vector<std::string> args;
  std::size_t arg_end = end - 1;
  while (true) {
    const char c = s[i];
    if (c == '>') ++depth;
    else if (c == ')') ++parens;
    else if (c == '(') --parens;
    else if (c == '<' && --depth == 0) {
      args.push_back(s.substr(i + 1, arg_end - i - 1));
      break;
    } else if (c == ',' && depth == 1 && parens == 0) {
      args.push_back(s.substr(i + 1, arg_end - i - 1));
      arg_end = i;
    }
    if (i == 0) return {};
    --i;
  }
  std::reverse(args.begin(), args.end());
  for (auto& a : args) a.erase(0, a.find_first_not_of(' '));
  return args;
}

}  // namespace heapscope
