#include "frontends/lldb/thread_pointers.h"

#include <optional>
#include <string_view>

#include "frontends/common/thread_pointers.h"
#include "runtime/builtin/builtin_runtimes.h"

namespace heapscope::lldb_plugin {

namespace {

// A symbol's load address in the first module whose file name starts with `module_prefix`.
std::optional<Address> symbol_address(lldb::SBTarget& target, std::string_view module_prefix, std::string_view name) {
  const std::string symbol_name(name);
  for (std::uint32_t i = 0; i < target.GetNumModules(); ++i) {
    lldb::SBModule module = target.GetModuleAtIndex(i);
    const char* file = module.GetFileSpec().GetFilename();
    if (!file || std::string_view(file).substr(0, module_prefix.size()) != module_prefix) continue;
    lldb::SBSymbol symbol = module.FindSymbol(symbol_name.c_str());
    if (!symbol.IsValid()) continue;
    const lldb::addr_t load = symbol.GetStartAddress().GetLoadAddress(target);
    if (load != LLDB_INVALID_ADDRESS) return load;
  }
  return std::nullopt;
}

}  // namespace

std::map<std::uint32_t, Address> glibc_thread_pointers(lldb::SBTarget target, const MemoryReader& read,
                                                       std::string* error) {
  const LibcThreads threads = read_libc_threads(read, [&](std::string_view module, std::string_view name) {
    return symbol_address(target, module, name);
  });
  return heapscope::glibc_thread_pointers(threads, read, error);
}

}  // namespace heapscope::lldb_plugin
