#include "frontends/lldb/thread_pointers.h"

#include <fmt/format.h>

#include <optional>
#include <set>

namespace heapscope::lldb_plugin {

namespace {

// A libthread_db field descriptor: {size in bits, element count, byte offset}.
struct FieldDescriptor {
  std::uint32_t bits = 0;
  std::uint32_t count = 0;
  std::uint32_t offset = 0;
};

constexpr std::uint32_t kMaxFieldOffset = 1 << 16;  // glibc's structures are far smaller
constexpr std::size_t kMaxThreads = 1 << 20;

std::optional<Address> symbol_address(lldb::SBTarget& target, const char* name) {
  lldb::SBSymbolContextList found = target.FindSymbols(name);
  for (std::uint32_t i = 0; i < found.GetSize(); ++i) {
    lldb::SBSymbol symbol = found.GetContextAtIndex(i).GetSymbol();
    const lldb::addr_t load = symbol.GetStartAddress().GetLoadAddress(target);
    if (load != LLDB_INVALID_ADDRESS) return load;
  }
  return std::nullopt;
}

class ThreadListReader {
 public:
  ThreadListReader(lldb::SBTarget target, const MemoryReader& read) : target_(target), read_(read) {}

  std::map<std::uint32_t, Address> read_all(std::string* error) {
    const auto rtld_global = symbol_address(target_, "_rtld_global");
    const auto stack_user = field("_thread_db_rtld_global__dl_stack_user", 128);
    const auto stack_used = field("_thread_db_rtld_global__dl_stack_used", 128);
    const auto list = field("_thread_db_pthread_list", 128);
    const auto tid = field("_thread_db_pthread_tid", 32);
    if (!rtld_global || !stack_user || !stack_used || !list || !tid) {
      *error = "glibc's thread list cannot be followed (no _rtld_global or _thread_db_* symbols: a static or "
               "non-glibc program?)";
      return {};
    }
    std::map<std::uint32_t, Address> pointers;
    for (const FieldDescriptor* head : {&*stack_user, &*stack_used})
      follow(*rtld_global + head->offset, list->offset, tid->offset, pointers);
    if (pointers.empty()) *error = "glibc's thread lists hold no thread";
    return pointers;
  }

 private:
  std::optional<FieldDescriptor> field(const char* symbol, std::uint32_t expected_bits) {
    const auto at = symbol_address(target_, symbol);
    FieldDescriptor d;
    if (!at || read_(*at, &d, sizeof d) != sizeof d) return std::nullopt;
    if (d.bits != expected_bits || d.offset >= kMaxFieldOffset) return std::nullopt;
    return d;
  }

  std::optional<std::uint64_t> u64(Address a) {
    std::uint64_t v = 0;
    return read_(a, &v, sizeof v) == sizeof v ? std::optional(v) : std::nullopt;
  }

  // A circular list_t of struct pthread's `list` fields; damage ends the walk, never loops.
  void follow(Address head, std::uint32_t list_offset, std::uint32_t tid_offset,
              std::map<std::uint32_t, Address>& pointers) {
    std::set<Address> seen;
    auto next = u64(head);
    while (next && *next != head && *next > list_offset && seen.insert(*next).second && seen.size() < kMaxThreads) {
      const Address descriptor = *next - list_offset;
      std::uint32_t tid = 0;
      const bool self_pointing = u64(descriptor) == descriptor && u64(descriptor + 16) == descriptor;
      if (self_pointing && read_(descriptor + tid_offset, &tid, sizeof tid) == sizeof tid && tid != 0)
        pointers.emplace(tid, descriptor);  // tid 0: a thread that has exited
      next = u64(*next);
    }
  }

  lldb::SBTarget target_;
  const MemoryReader& read_;
};

}  // namespace

std::map<std::uint32_t, Address> glibc_thread_pointers(lldb::SBTarget target, const MemoryReader& read,
                                                       std::string* error) {
  return ThreadListReader(target, read).read_all(error);
}

}  // namespace heapscope::lldb_plugin
