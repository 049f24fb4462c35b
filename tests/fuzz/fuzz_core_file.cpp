// Fuzz target: the ELF core reader (sources/elf_core_image) on arbitrary bytes — headers, the notes
// (NT_PRSTATUS, NT_PRPSINFO, NT_AUXV, NT_FILE), segments, and module discovery through NT_FILE, the
// auxiliary vector and the dynamic linker's list — then what the rest of heapscope asks of an image; an
// input with a zstd, lz4, xz or gzip magic through the decompression first (sources/compressed_core).
#include <algorithm>
#include <cstdint>
#include <string>

#include "sources/compressed_core.h"
#include "sources/elf_core_image.h"
#include "input_file.h"

using namespace heapscope;

namespace {

// Reads a little of every region and from every thread's stack pointer, as the walker and roots do.
void touch(const ElfCoreImage& image) {
  std::uint8_t buffer[256];
  std::size_t regions = 0;
  for (const MemoryRegion& r : image.regions()) {
    if (++regions > 64) break;
    image.read(r.start, buffer, sizeof buffer);
    image.read(r.end - std::min<std::uint64_t>(r.size(), sizeof buffer), buffer, sizeof buffer);
    (void)image.view(r.start, std::min<std::uint64_t>(r.size(), 4096));
  }
  for (const ThreadState& t : image.threads()) image.read(t.sp(), buffer, sizeof buffer);
  (void)threads_without_stack(image);
  for (const Module& m : image.modules()) (void)image.module_at(m.start);
  (void)missing_writable_bytes(image);
  (void)image.description();
  (void)image.damage();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // A compressed input is decompressed into a temporary copy: a few MiB of one, so that a small input that
  // inflates to gigabytes is refused at once rather than written out or measured to its end.
  static const bool bounded = [] {
    CoreCopyCache cache{std::string(), 16u << 20};
    cache.set_measure_limit(32u << 20);
    CoreCopyCache::set_process(std::move(cache));
    return true;
  }();
  (void)bounded;
  fuzz::InputFile file(data, size);
  if (!file.ok()) return 0;
  std::string error;
  const auto image = ElfCoreImage::open(file.path(), CoreOpenOptions{}, &error);
  if (image) touch(*image);
  return 0;
}
