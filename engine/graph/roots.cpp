#include "graph/roots.h"

#include <fmt/format.h>

#include <algorithm>

#include "elf/elf_file.h"

namespace heapscope {

namespace {

constexpr Address kRedZone = 128;  // the x86-64 ABI lets leaf functions keep data below the stack pointer

std::string thread_label(const Image& image, std::uint32_t index) {
  const auto& threads = image.threads();
  return index < threads.size() ? fmt::format("thread {} (tid {})", index + 1, threads[index].tid)
                                : fmt::format("thread {}", index + 1);
}

std::string basename_of(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

using Ranges = std::vector<HeapSegment>;

Ranges heap_ranges(const HeapModel& heap) {
  Ranges r;
  for (const ArenaInfo& a : heap.arenas) r.insert(r.end(), a.heaps.begin(), a.heaps.end());
  r.insert(r.end(), heap.metadata.begin(), heap.metadata.end());
  for (const Block& b : heap.blocks)
    if (b.state == BlockState::mmapped) r.push_back({b.chunk & ~Address{4095}, b.chunk + b.chunk_size()});
  std::sort(r.begin(), r.end(), [](auto& x, auto& y) { return x.start < y.start; });
  return r;
}

// [start, end) minus the heap ranges, appended to out as roots of `proto`'s kind.
void add_minus_heap(std::vector<RootRange>& out, RootRange proto, const Ranges& heap) {
  Address cursor = proto.start;
  for (const HeapSegment& h : heap) {
    if (h.end <= cursor || h.start >= proto.end) continue;
    if (h.start > cursor) {
      RootRange piece = proto;
      piece.start = cursor;
      piece.end = h.start;
      out.push_back(piece);
    }
    cursor = std::max(cursor, h.end);
  }
  if (cursor < proto.end) {
    proto.start = cursor;
    out.push_back(proto);
  }
}

void add_thread_roots(const Image& image, std::vector<RootRange>& out, Ranges& claimed) {
  const auto& threads = image.threads();
  for (std::uint32_t i = 0; i < threads.size(); ++i) {
    const ThreadState& t = threads[i];
    RootRange regs;
    regs.kind = RootKind::registers;
    regs.thread = i;
    out.push_back(regs);
    if (const MemoryRegion* stack = image.region_at(t.sp())) {
      RootRange s;
      s.kind = RootKind::stack;
      s.thread = i;
      s.anchor = t.sp();
      s.start = std::max(stack->start, (t.sp() - kRedZone) & ~Address{7});
      s.end = stack->end;
      out.push_back(s);
      claimed.push_back({stack->start, stack->end});
    }
  }
}

// The main thread's TLS and TCB live in memory ld.so allocated; other threads' sit at the top of their
// stacks (already scanned). Scanning the mapping around fs_base covers both without knowing glibc's
// static TLS size.
void add_tls_roots(const Image& image, std::vector<RootRange>& out, Ranges& claimed, const Ranges& heap) {
  const auto& threads = image.threads();
  for (std::uint32_t i = 0; i < threads.size(); ++i) {
    const Address tp = threads[i].fs_base();
    const MemoryRegion* r = tp ? image.region_at(tp) : nullptr;
    if (!r || !r->writable) continue;
    const bool in_claimed = std::any_of(claimed.begin(), claimed.end(),
                                        [&](const HeapSegment& c) { return tp >= c.start && tp < c.end; });
    if (in_claimed) continue;  // a pthread's TLS: part of its stack mapping
    RootRange tls;
    tls.kind = RootKind::tls;
    tls.thread = i;
    tls.start = r->start;
    tls.end = r->end;
    add_minus_heap(out, tls, heap);
    claimed.push_back({r->start, r->end});
  }
}

void add_module_roots(const Image& image, std::vector<RootRange>& out, Ranges& claimed, const Ranges& heap,
                      std::vector<std::string>& warnings) {
  const auto& modules = image.modules();
  for (std::uint32_t m = 0; m < modules.size(); ++m) {
    const Module& mod = modules[m];
    if (mod.file_on_disk.empty()) continue;
    std::string error;
    auto elf = ElfFile::open(mod.file_on_disk, &error);
    if (!elf) {
      warnings.push_back(fmt::format("globals of {} are not scanned: {}", mod.path, error));
      continue;
    }
    for (const GElf_Phdr& ph : elf->program_headers()) {
      if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_W)) continue;
      RootRange g;
      g.kind = RootKind::global;
      g.module = m;
      g.start = (mod.load_bias + ph.p_vaddr) & ~Address{7};
      g.end = mod.load_bias + ph.p_vaddr + ph.p_memsz;
      add_minus_heap(out, g, heap);
      claimed.push_back({g.start, g.end});
    }
  }
}

// Anonymous writable memory nobody else accounts for: custom mmaps, ld.so's own allocations. Scanning
// it can only hide leaks (as valgrind does too), never invent them.
void add_anonymous_roots(const Image& image, std::vector<RootRange>& out, Ranges claimed, const Ranges& heap) {
  claimed.insert(claimed.end(), heap.begin(), heap.end());
  std::sort(claimed.begin(), claimed.end(), [](auto& x, auto& y) { return x.start < y.start; });
  for (const MemoryRegion& r : image.regions()) {
    if (!r.readable || !r.writable || !r.bytes_present || !r.backing_path.empty()) continue;
    RootRange a;
    a.kind = RootKind::anonymous;
    a.start = r.start;
    a.end = r.end;
    add_minus_heap(out, a, claimed);
  }
}

}  // namespace

const char* root_kind_name(RootKind k) {
  switch (k) {
    case RootKind::registers: return "register";
    case RootKind::stack: return "stack";
    case RootKind::global: return "global";
    case RootKind::tls: return "tls";
    case RootKind::dynamic_tls: return "dynamic_tls";
    case RootKind::anonymous: return "anonymous";
  }
  return "?";
}

const std::vector<Reg>& scanned_registers() {
  static const std::vector<Reg> regs = {Reg::rax, Reg::rbx, Reg::rcx, Reg::rdx, Reg::rsi, Reg::rdi,
                                        Reg::rbp, Reg::rsp, Reg::r8,  Reg::r9,  Reg::r10, Reg::r11,
                                        Reg::r12, Reg::r13, Reg::r14, Reg::r15, Reg::rip};
  return regs;
}

std::vector<Reg> registers_pointing_into(const ThreadState& thread, Address lo, Address hi) {
  std::vector<Reg> out;
  for (Reg r : scanned_registers())
    if (thread.reg(r) >= lo && thread.reg(r) < hi) out.push_back(r);
  return out;
}

RootSet collect_roots(const Image& image, const HeapModel& heap) {
  RootSet roots;
  const Ranges heap_r = heap_ranges(heap);
  Ranges claimed;
  add_thread_roots(image, roots.ranges, claimed);
  add_module_roots(image, roots.ranges, claimed, heap_r, roots.warnings);
  add_tls_roots(image, roots.ranges, claimed, heap_r);
  add_anonymous_roots(image, roots.ranges, claimed, heap_r);
  return roots;
}

std::string describe_root(const Image& image, const SymbolIndex& symbols, const RootRange& root, Address word) {
  switch (root.kind) {
    case RootKind::registers:
      return fmt::format("register {}, {}", register_name(static_cast<Reg>(word)), thread_label(image, root.thread));
    case RootKind::stack:
      return fmt::format("stack of {}, sp+0x{:x}", thread_label(image, root.thread), word - root.anchor);
    case RootKind::global: {
      // Through the root's own module: .bss past the file's last page lies outside the module's mappings.
      const Module& mod = image.modules()[root.module];
      const std::string module = basename_of(mod.path);
      const ModuleSymbols* syms = symbols.symbols_for(mod);
      if (const Symbol* s = syms ? syms->covering(word - mod.load_bias) : nullptr) {
        const std::string name = demangle(s->name);
        const Address offset = word - mod.load_bias - s->value;
        return offset ? fmt::format("global {}+0x{:x} in {}", name, offset, module)
                      : fmt::format("global {} in {}", name, module);
      }
      return fmt::format("global {}+0x{:x}", module, word - mod.load_bias);
    }
    case RootKind::tls:
      return fmt::format("static TLS of {}, tp-0x{:x}", thread_label(image, root.thread),
                         image.threads()[root.thread].fs_base() - word);
    case RootKind::dynamic_tls:
      return fmt::format("dynamic TLS of {}", thread_label(image, root.thread));
    case RootKind::anonymous:
      return fmt::format("anonymous mapping 0x{:x}-0x{:x} at +0x{:x}", root.start, root.end, word - root.start);
  }
  return "?";
}

}  // namespace heapscope
