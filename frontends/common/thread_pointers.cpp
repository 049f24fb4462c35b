#include "frontends/common/thread_pointers.h"

#include <fmt/format.h>

#include <optional>

#include "runtime/builtin/builtin_runtimes.h"

namespace heapscope {

namespace {

std::optional<std::uint64_t> u64(const MemoryReader& read, Address a) {
  std::uint64_t v = 0;
  return read(a, &v, sizeof v) == sizeof v ? std::optional(v) : std::nullopt;
}

}  // namespace

std::map<std::uint32_t, Address> glibc_thread_pointers(const LibcThreads& threads, const MemoryReader& read,
                                                       std::string* error) {
  std::map<std::uint32_t, Address> pointers;
  for (const LibcThread& t : threads.threads) {
    // tid 0: a thread that has exited. On x86-64 the descriptor starts with two pointers to itself
    // (tcbhead_t.tcb and .self), which confirms each entry is a live thread's.
    const bool self_pointing = u64(read, t.descriptor) == t.descriptor && u64(read, t.descriptor + 16) == t.descriptor;
    if (t.tid != 0 && self_pointing) pointers.emplace(t.tid, t.descriptor);
  }
  if (pointers.empty())
    *error = !threads.warnings.empty() ? threads.warnings.front() : "glibc's thread lists hold no live thread";
  return pointers;
}

std::string unknown_thread_pointer(std::size_t index, std::uint32_t tid, const std::string& why) {
  return fmt::format("the thread pointer (fs_base) of thread {} (tid {}) is unknown ({}), so its tcache and TLS are "
                     "not read",
                     index + 1, tid, why.empty() ? "the debugger does not show it and glibc's thread list lacks the thread" : why);
}

void complete_thread_pointers(CollectedImage& image, const SymbolSearchOptions& options) {
  const std::vector<ThreadState>& threads = image.threads();
  auto unknown = [&](std::size_t i) { return threads[i].regs[static_cast<int>(Reg::fs_base)] == 0; };
  bool any = false;
  for (std::size_t i = 0; i < threads.size(); ++i) any = any || unknown(i);
  if (!any) return;
  std::string error;
  std::map<std::uint32_t, Address> pointers;
  {
    const SymbolIndex symbols(image, options);
    pointers = glibc_thread_pointers(read_libc_threads(image, symbols), memory_reader_for(image), &error);
  }
  if (pointers.empty()) pointers = thread_pointers_from_memory(image);  // musl's descriptors
  for (std::size_t i = 0; i < threads.size(); ++i) {
    if (!unknown(i)) continue;
    if (const auto it = pointers.find(threads[i].tid); it != pointers.end())
      image.set_thread_pointer(i, it->second);
    else
      image.add_warning(unknown_thread_pointer(i, threads[i].tid, error));
  }
}

}  // namespace heapscope
