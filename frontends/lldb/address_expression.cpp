#include "frontends/lldb/address_expression.h"

#include <optional>
#include <sstream>

#include "image/address_literal.h"
#include "session/session.h"

namespace heapscope::lldb_plugin {

namespace {

// "(void*)0x55d0c0a012a0", "(struct node *) 93824992916288": a number cast to a pointer type.
std::optional<Address> number_cast_to_pointer(const std::string& text) {
  constexpr const char* kBlanks = " \t";
  const auto close = text.find(')');
  if (text.empty() || text.front() != '(' || close == std::string::npos || text.find('(', 1) < close)
    return std::nullopt;
  const auto type_end = text.find_last_not_of(kBlanks, close - 1);  // the cast's last character
  if (type_end == 0 || text[type_end] != '*') return std::nullopt;
  const auto number_start = text.find_first_not_of(kBlanks, close + 1);
  if (number_start == std::string::npos) return std::nullopt;
  return parse_address_literal(text.substr(number_start));
}

// LLDB's expression errors span lines ("expression failed to parse:", then "error: <user expression
// 0>:1:1: use of undeclared identifier 'x'", the source and a caret); the first "error:" line says why.
std::string reason(const char* message) {
  std::istringstream lines(message ? message : "");
  std::string line, first;
  while (std::getline(lines, line)) {
    if (first.empty()) first = line;
    if (line.rfind("error: ", 0) != 0) continue;
    line.erase(0, 7);
    if (line.rfind("<user expression", 0) == 0) {
      const auto colon_space = line.find(": ");
      if (colon_space != std::string::npos) line.erase(0, colon_space + 2);
    }
    return line;
  }
  return first.empty() ? "no value" : first;
}

bool is_object(lldb::SBType type) {
  const auto cls = type.GetCanonicalType().GetTypeClass();
  return (cls & (lldb::eTypeClassArray | lldb::eTypeClassStruct | lldb::eTypeClassClass | lldb::eTypeClassUnion)) != 0;
}

// A value's address argument: a pointer's or an integer's value, an object's own address.
std::string address_of_value(lldb::SBValue value, const std::string& text, Address* address) {
  if (is_object(value.GetType())) {
    const lldb::addr_t load = value.GetLoadAddress();
    if (load == LLDB_INVALID_ADDRESS) return "'" + text + "' is an object with no address in the process";
    *address = load;
    return "";
  }
  lldb::SBError error;
  const std::uint64_t number = value.GetValueAsUnsigned(error, 0);
  if (error.Fail()) return "'" + text + "' has no numeric value: " + reason(error.GetCString());
  *address = number;
  return "";
}

// On the LLDB thread. Returns an error message, or empty with *address set.
//
// A variable path ("g_cache", "node->next", "&g_table[2]") is read the way `frame variable` reads it.
// Only what that cannot read goes to the expression evaluator, because LLDB evaluates expressions in a
// live process with scratch memory it maps there, and the results it leaves in that memory (copies of
// the very pointers asked about) would be roots to every later analysis of the process.
std::string evaluate_on_lldb_thread(lldb::SBFrame frame, lldb::SBTarget target, const std::string& text,
                                    Address* address) {
  if (frame.IsValid()) {
    lldb::SBValue variable = frame.GetValueForVariablePath(text.c_str());
    if (variable.IsValid() && variable.GetError().Success()) return address_of_value(variable, text, address);
  }
  lldb::SBValue value = frame.IsValid() ? frame.EvaluateExpression(text.c_str()) : target.EvaluateExpression(text.c_str());
  if (!value.IsValid()) return "cannot evaluate '" + text + "'";
  if (value.GetError().Fail()) return "cannot evaluate '" + text + "': " + reason(value.GetError().GetCString());
  return address_of_value(value, text, address);
}

}  // namespace

Address evaluate_address_expression(ServingThread& lldb_thread, lldb::SBFrame frame, lldb::SBTarget target,
                                    const std::string& text) {
  if (const auto number = parse_address_literal(text)) return *number;
  if (const auto number = number_cast_to_pointer(text)) return *number;
  Address address = 0;
  std::string error;
  lldb_thread.call([&] { error = evaluate_on_lldb_thread(frame, target, text, &address); });
  if (!error.empty()) throw AnalysisError(error);
  return address;
}

}  // namespace heapscope::lldb_plugin
