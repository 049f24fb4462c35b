#include "model/roots.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "base/workers.h"
#include "elf/elf_file.h"
#include "runtime/static_tls.h"

namespace heapscope {

namespace {

constexpr Address kRedZone = 128;  // the x86-64 ABI lets leaf functions keep data below the stack pointer


using Ranges = std::vector<HeapSegment>;

// The runs [first, last) of the block array outside every arena heap segment, in order: where the blocks
// that are mappings of their own (glibc's mmapped chunks, musl's lone groups) are.
std::vector<std::pair<std::size_t, std::size_t>> blocks_outside_segments(const HeapModel& heap) {
  std::vector<std::pair<std::size_t, std::size_t>> outside;
  std::size_t cursor = 0;
  for (const SegmentBlocks& run : heap.blocks_by_segment()) {
    if (run.first > cursor) outside.emplace_back(cursor, run.first);
    cursor = run.last;
  }
  if (cursor < heap.blocks.size()) outside.emplace_back(cursor, heap.blocks.size());
  return outside;
}

Ranges heap_ranges(const HeapModel& heap) {
  Ranges r;
  for (const ArenaInfo& a : heap.arenas) r.insert(r.end(), a.heaps.begin(), a.heaps.end());
  r.insert(r.end(), heap.metadata.begin(), heap.metadata.end());
  r.insert(r.end(), heap.reserved.begin(), heap.reserved.end());
  r.insert(r.end(), heap.not_roots.begin(), heap.not_roots.end());
  // The mmapped blocks, from the pages they start in. Only the blocks outside the segments are looked at:
  // one inside is covered by its segment already, and a pass over every block would read the whole block
  // array, most of a one-block command's time with a saved index. An allocator without segments leaves one
  // run, the whole array, in slices on all cores.
  for (const auto& [first, last] : blocks_outside_segments(heap)) {
    const Ranges found = collect_from_slices<HeapSegment>(
        last - first, kBlocksPerWorker, [&, first = first](std::size_t from, std::size_t to, Ranges& out) {
          for (std::size_t i = first + from; i < first + to; ++i)
            if (const Block& b = heap.blocks[i]; b.state == BlockState::mmapped)
              out.push_back({b.chunk & ~Address{4095}, b.chunk + b.chunk_size()});
        });
    r.insert(r.end(), found.begin(), found.end());
  }
  std::sort(r.begin(), r.end(), [](auto& x, auto& y) { return x.start < y.start; });
  return r;
}

// [start, end) minus the sorted `taken` ranges, appended to out as roots of `proto`'s kind.
void add_minus(std::vector<RootRange>& out, RootRange proto, const Ranges& taken) {
  Address cursor = proto.start;
  for (const HeapSegment& h : taken) {
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

// The C library's record of the live thread whose pointer is `tp`, or null.
const LibcThread* recorded_thread(const LibcThreads& libc, Address tp) {
  for (const LibcThread& t : libc.threads)
    if (tp && t.descriptor == tp && !t.exited()) return &t;
  return nullptr;
}

// Each thread's registers, its stack from the stack pointer (less the red zone) to its mapping's end, and
// the TLS at the top of that mapping. The mapping is the region around the stack pointer, cut to the
// thread's own mapping where the C library records it (musl); anonymous mappings next to each other with
// the same rights are one region, so what the heap walk accounts for (a group mapped right above a musl
// thread's stack) is left out.
void add_thread_roots(const Image& image, const LibcThreads& libc, const Ranges& heap, std::vector<RootRange>& out,
                      Ranges& claimed) {
  const auto& threads = image.threads();
  for (std::uint32_t i = 0; i < threads.size(); ++i) {
    const ThreadState& t = threads[i];
    RootRange regs;
    regs.kind = RootKind::registers;
    regs.thread = i;
    out.push_back(regs);
    if (const MemoryRegion* stack = image.region_at(t.sp())) {
      const Address tp = t.fs_base();
      const LibcThread* known = recorded_thread(libc, tp);
      Address start = stack->start, end = stack->end;
      if (known && known->stack_start < known->stack_end && known->stack_start <= t.sp() && t.sp() < known->stack_end) {
        start = std::max(start, known->stack_start);
        end = std::min(end, known->stack_end);
      }
      RootRange s;
      s.kind = RootKind::stack;
      s.thread = i;
      s.anchor = t.sp();
      s.start = std::max(start, (t.sp() - kRedZone) & ~Address{7});
      s.end = end;
      // A pthread's static TLS and descriptor sit at the top of its stack mapping, above its frames: they
      // are TLS, not the outermost frame's stack.
      const bool tls_on_stack = tp > s.start && tp < end;
      if (tls_on_stack) {
        const Address recorded = known ? known->tls_start : 0;
        s.end = std::max(s.start, recorded ? recorded : static_tls_start(image, tp, start));
      }
      if (s.start < s.end) add_minus(out, s, heap);
      if (tls_on_stack) {
        RootRange tls;
        tls.kind = RootKind::tls;
        tls.thread = i;
        tls.start = s.end;
        tls.end = end;
        add_minus(out, tls, heap);
      }
      claimed.push_back({start, end});
    }
  }
}

// The main thread's TLS and TCB live in memory ld.so allocated; other threads' sit at the top of their
// stacks (add_thread_roots splits them off). Scanning the mapping around fs_base covers both without knowing glibc's
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
    add_minus(out, tls, heap);
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
    if (!elf) {  // its writable mappings are still roots (add_unclaimed_file_roots), just without names
      warnings.push_back(fmt::format("global variables of {} cannot be named: {}", mod.path, error));
      continue;
    }
    for (const GElf_Phdr& ph : elf->program_headers()) {
      if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_W)) continue;
      RootRange g;
      g.kind = RootKind::global;
      g.module = m;
      g.start = (mod.load_bias + ph.p_vaddr) & ~Address{7};
      g.end = mod.load_bias + ph.p_vaddr + ph.p_memsz;
      add_minus(out, g, heap);
      claimed.push_back({g.start, g.end});
    }
  }
}

// An exited thread's descriptor stays until it is joined (or, for a cached stack, reused), and keeps its
// DTV, TLS blocks and pthread key data; the rest of its stack mapping is dead.
void add_exited_thread_roots(const LibcThreads& glibc, std::vector<RootRange>& out, Ranges& claimed) {
  for (const LibcThread& t : glibc.threads) {
    if (!t.exited() || t.stack_start == 0) continue;
    claimed.push_back({t.stack_start, t.stack_end});
    RootRange r;
    r.kind = RootKind::exited_thread;
    r.anchor = t.descriptor;
    r.in_stack_cache = t.list == LibcThread::List::cache;  // glibc keeps its DTV for the next thread
    r.start = t.descriptor;
    r.end = std::min(t.stack_end, t.descriptor + glibc.descriptor_size);
    out.push_back(r);
  }
}

// TLS blocks of dlopen'ed modules are malloc'ed on first use and reached through the thread's DTV
// (tcbhead_t.dtv at tp+8; dtv[-1] holds its length, each entry is {val, to_free}). Their words are roots
// labelled by thread and module id. That is glibc's DTV: musl's holds bare pointers (and musl allocates a
// dlopen'ed module's TLS for every thread in dlopen, in blocks its loader's records keep), so none for it.
void add_dynamic_tls_roots(const Image& image, const HeapModel& heap, const LibcThreads& libc,
                           std::vector<RootRange>& out) {
  constexpr std::uint64_t kMaxModules = 1 << 16;
  if (libc.library == LibcThreads::Library::musl) return;
  const auto& threads = image.threads();
  for (std::uint32_t i = 0; i < threads.size(); ++i) {
    const Address tp = threads[i].fs_base();
    const auto dtv = tp ? image.read_u64(tp + 8) : std::nullopt;
    const auto length = dtv && *dtv ? image.read_u64(*dtv - 16) : std::nullopt;
    if (!length || *length == 0 || *length > kMaxModules) continue;
    for (std::uint64_t modid = 1; modid <= *length; ++modid) {
      const auto val = image.read_u64(*dtv + 16 * modid);
      const auto to_free = image.read_u64(*dtv + 16 * modid + 8);
      if (!val || !to_free || *to_free == 0) continue;  // static TLS or not allocated yet
      const Block* b = heap.block_containing(*to_free);
      if (!b || !is_allocated(b->state) || *val < b->address() || *val >= b->address() + b->usable_size()) continue;
      RootRange r;
      r.kind = RootKind::dynamic_tls;
      r.thread = i;
      r.anchor = modid;
      r.start = *val;
      r.end = b->address() + b->usable_size();
      out.push_back(r);
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
    add_minus(out, a, claimed);
  }
}

// Writable file-backed memory the image holds that no module's program headers claimed: the data of a
// module whose file is missing or is another program's (a wrong --exe, a build-id mismatch), and private
// file mappings a program wrote to. Its words are the process's own whether or not the file opens, so it
// is a root like the globals it holds; only their names are unknown.
void add_unclaimed_file_roots(const Image& image, std::vector<RootRange>& out, Ranges claimed, const Ranges& heap) {
  claimed.insert(claimed.end(), heap.begin(), heap.end());
  std::sort(claimed.begin(), claimed.end(), [](auto& x, auto& y) { return x.start < y.start; });
  const auto& modules = image.modules();
  for (const MemoryRegion& r : image.regions()) {
    if (!r.readable || !r.writable || !r.bytes_present || r.backing_path.empty()) continue;
    RootRange g;
    g.kind = RootKind::global;
    g.start = r.start;
    g.end = r.end;
    const Module* mod = image.module_at(r.start);
    g.module = mod ? static_cast<std::uint32_t>(mod - modules.data()) : RootRange::kNoModule;
    g.label = r.backing_path;
    add_minus(out, g, claimed);
  }
}

// `added` (sorted, not overlapping) carved out of the roots collected before them (registers aside), so no
// word counts twice, and added to them: whole, or only where an earlier root covered them.
enum class Carve { whole, where_covered };
void carve_out(RootSet& roots, std::vector<RootRange> added, Carve how) {
  Ranges taken;
  for (const RootRange& a : added) taken.push_back({a.start, a.end});
  std::vector<RootRange> carved, covered;
  for (RootRange& r : roots.ranges) {
    if (r.kind == RootKind::registers) {
      carved.push_back(std::move(r));
      continue;
    }
    if (how == Carve::where_covered)
      for (const RootRange& a : added)
        if (a.start < r.end && r.start < a.end) {
          RootRange piece = a;
          piece.start = std::max(a.start, r.start);
          piece.end = std::min(a.end, r.end);
          covered.push_back(std::move(piece));
        }
    add_minus(carved, std::move(r), taken);
  }
  std::vector<RootRange>& kept = how == Carve::whole ? added : covered;
  carved.insert(carved.end(), std::make_move_iterator(kept.begin()), std::make_move_iterator(kept.end()));
  roots.ranges = std::move(carved);
}

// One root per registration that holds memory, its slot carved out of the roots collected before it.
void add_finalizer_roots(const Image& image, RootSet& roots) {
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < roots.finalizers.size(); ++i)
    if (roots.finalizers[i].slot_start < roots.finalizers[i].slot_end) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return roots.finalizers[a].slot_start < roots.finalizers[b].slot_start;
  });
  std::vector<RootRange> finalizers;
  for (std::size_t i : order) {
    const FinalizerRegistration& reg = roots.finalizers[i];
    if (!finalizers.empty() && reg.slot_start < finalizers.back().end) continue;  // two registrations of one object: one holds it
    RootRange r;
    r.kind = RootKind::finalizer;
    r.start = reg.slot_start;
    r.end = reg.slot_end;
    r.thread = reg.thread;
    r.anchor = i;
    r.hidden_pointer = reg.hidden_pointer;
    r.label = finalizer_label(image, reg);
    finalizers.push_back(std::move(r));
  }
  carve_out(roots, std::move(finalizers), Carve::whole);
}

// An interpreter's frames (HeapModel::interpreter_frames): each local's word a root of its own, the frame's
// other words one more, owned by the frame's thread; only where its memory was a root already (its own
// anonymous mapping), never inside the heap.
void add_interpreter_frame_roots(const Image& image, const HeapModel& heap, RootSet& roots) {
  std::vector<RootRange> frames;
  for (std::size_t i = 0; i < heap.interpreter_frames.size(); ++i) {
    const InterpreterFrame& f = heap.interpreter_frames[i];
    RootRange proto;
    proto.kind = RootKind::interpreter_frame;
    proto.anchor = i;
    proto.thread = RootRange::kNoThread;
    for (std::uint32_t t = 0; t < image.threads().size(); ++t)
      if (f.tid && image.threads()[t].tid == f.tid) proto.thread = t;
    proto.label = interpreter_frame_text(f, LabelDetail::exact);
    Address cursor = f.start;
    const auto frame_words = [&](Address end) {
      if (cursor >= end) return;
      RootRange r = proto;
      r.start = cursor;
      r.end = end;
      frames.push_back(std::move(r));
    };
    for (const InterpreterFrame::Local& local : f.locals) {
      if (local.at < cursor || local.at + 8 > f.end) continue;
      frame_words(local.at);
      RootRange r = proto;
      r.start = local.at;
      r.end = local.at + 8;
      r.part = local.name;
      frames.push_back(std::move(r));
      cursor = local.at + 8;
    }
    frame_words(f.end);
  }
  std::sort(frames.begin(), frames.end(), [](const RootRange& a, const RootRange& b) { return a.start < b.start; });
  // Two frames never share words; a chain read twice (a thread state found twice) gives the same frames.
  frames.erase(std::unique(frames.begin(), frames.end(), [](const RootRange& a, const RootRange& b) {
                 return b.start < a.end;
               }), frames.end());
  if (!frames.empty()) carve_out(roots, std::move(frames), Carve::where_covered);
}

// Whether a root of `kind` is one of the collector's by its own kind: a thread's registers, stack and TLS,
// a finalizer's registration, a module's data unless the collector reads none (GC_no_dls), and anonymous
// memory where the heap's own mark procedures may read it (CollectorRules::anonymous_roots).
bool collector_root_by_kind(const RootRange& r, const CollectorRules& rules) {
  switch (r.kind) {
    case RootKind::registers:
    case RootKind::stack:
    case RootKind::tls:
    case RootKind::finalizer: return true;
    case RootKind::anonymous: return rules.anonymous_roots;
    case RootKind::global: return r.module != RootRange::kNoModule && rules.module_data_roots;
    default: return false;  // anonymous mappings, malloc'ed TLS, exited threads' descriptors
  }
}

bool inside_any(const Ranges& ranges, Address start, Address end) {
  return std::any_of(ranges.begin(), ranges.end(), [&](const HeapSegment& r) { return r.start <= start && end <= r.end; });
}

// The threads the collector started itself (their start routine in its code): its parallel markers.
std::vector<bool> collectors_threads(const Image& image, const LibcThreads& libc, const CollectorRules& rules) {
  std::vector<bool> own(image.threads().size(), false);
  for (std::size_t i = 0; i < own.size(); ++i)
    if (const LibcThread* t = recorded_thread(libc, image.threads()[i].fs_base()))
      own[i] = t->start_routine >= rules.code.start && t->start_routine < rules.code.end;
  return own;
}

// Each root split where a registered or excluded range begins or ends, and marked a collector's root or
// not; a registered range no root covers (inside a malloc block) becomes a root of its own. The threads
// the collector started hold none of its roots.
void mark_collector_roots(const Image& image, const LibcThreads& libc, RootSet& roots, const CollectorRules& rules) {
  const std::vector<bool> own_threads = collectors_threads(image, libc, rules);
  const auto own_thread = [&](const RootRange& r) {
    const bool of_thread = r.kind == RootKind::registers || r.kind == RootKind::stack || r.kind == RootKind::tls;
    return of_thread && r.thread < own_threads.size() && own_threads[r.thread];
  };
  std::vector<Address> cuts;
  for (const Ranges* set : {&rules.registered_roots, &rules.excluded_roots})
    for (const HeapSegment& r : *set) cuts.insert(cuts.end(), {r.start, r.end});
  std::sort(cuts.begin(), cuts.end());
  std::vector<RootRange> out;
  Ranges covered;
  for (RootRange& r : roots.ranges) {
    std::vector<RootRange> pieces;
    if (r.kind == RootKind::registers) {
      pieces.push_back(std::move(r));
    } else {
      Address from = r.start;
      for (auto cut = std::upper_bound(cuts.begin(), cuts.end(), r.start); cut != cuts.end() && *cut < r.end; ++cut) {
        RootRange piece = r;
        piece.start = from;
        piece.end = *cut;
        pieces.push_back(std::move(piece));
        from = *cut;
      }
      r.start = from;
      pieces.push_back(std::move(r));
    }
    for (RootRange& piece : pieces) {
      const bool registers = piece.kind == RootKind::registers;
      if (!registers) covered.push_back({piece.start, piece.end});
      piece.collector_root =
          !own_thread(piece) &&
          (registers || (!inside_any(rules.excluded_roots, piece.start, piece.end) &&
                         (inside_any(rules.registered_roots, piece.start, piece.end) || collector_root_by_kind(piece, rules))));
      out.push_back(std::move(piece));
    }
  }
  std::sort(covered.begin(), covered.end(), [](auto& x, auto& y) { return x.start < y.start; });
  for (const HeapSegment& registered : rules.registered_roots) {
    RootRange proto;
    proto.kind = RootKind::anonymous;
    proto.start = registered.start & ~Address{7};
    proto.end = registered.end;
    proto.collector_root = true;
    proto.label = "registered with the collector";
    std::vector<RootRange> uncovered;
    add_minus(uncovered, proto, covered);
    for (RootRange& piece : uncovered)
      if (!inside_any(rules.excluded_roots, piece.start, piece.end)) out.push_back(std::move(piece));
  }
  roots.ranges = std::move(out);
}

}  // namespace

std::string finalizer_label(const Image& image, const FinalizerRegistration& reg) {
  const std::string thread = reg.thread != FinalizerRegistration::kNoThread
                                 ? thread_label(image, reg.thread)
                                 : fmt::format("exited thread 0x{:x}", reg.exited_thread);
  switch (reg.kind) {
    case FinalizerKind::tls_dtor:
      return fmt::format("thread_local destructor {} of {} ({})", reg.function_name,
                         reg.variable.empty() ? fmt::format("0x{:x}", reg.object) : reg.variable, thread);
    case FinalizerKind::pthread_key:
      return fmt::format("pthread key {} destructor {} data ({})", reg.key, reg.function_name, thread);
    case FinalizerKind::gc_finalizer:
      return fmt::format("GC finalizer {} of object 0x{:x}{}", reg.function_name, reg.object,
                         reg.ready_to_run ? " (ready to run)" : "");
    default:
      return fmt::format("exit handler {} ({}) argument", reg.function_name, finalizer_kind_name(reg.kind));
  }
}

std::string thread_label(const Image& image, std::uint32_t index) {
  const auto& threads = image.threads();
  return index < threads.size() ? fmt::format("thread {} (tid {})", index + 1, threads[index].tid)
                                : fmt::format("thread {}", index + 1);
}

std::string thread_root_label(RootKind kind, const std::string& thread) {
  switch (kind) {
    case RootKind::registers: return "registers of " + thread;
    case RootKind::stack: return "stack of " + thread;
    case RootKind::tls: return "static TLS of " + thread;
    case RootKind::dynamic_tls: return "dynamic TLS of " + thread;
    default: return fmt::format("{} of {}", root_kind_name(kind), thread);
  }
}

std::string frame_root_label(const std::string& thread, std::size_t index, const Frame& frame,
                             const std::string& variable, LabelDetail detail) {
  const std::string held_by = variable.empty() ? "" : " variable " + variable;
  if (detail == LabelDetail::stable)
    return fmt::format("stack of {} in {}{}", thread, frame.function.empty() ? "an unknown function" : frame.function,
                       held_by);
  return fmt::format("stack of {} frame #{} {}{}", thread, index, frame.describe(), held_by);
}

std::string interpreter_thread_label(const Image& image, std::uint32_t thread) {
  return thread == RootRange::kNoThread ? "a thread heapscope does not see" : thread_label(image, thread);
}

std::string interpreter_frame_text(const InterpreterFrame& frame, LabelDetail detail) {
  if (detail == LabelDetail::stable) return fmt::format("python frame {}() in {}", frame.function, frame.file);
  return frame.line ? fmt::format("python frame {}() at {}:{}", frame.function, frame.file, frame.line)
                    : fmt::format("python frame {}() in {}", frame.function, frame.file);
}

std::string interpreter_frame_label(const std::string& thread, const std::string& frame_text, const std::string& part) {
  return part.empty() ? fmt::format("{}, {}", thread, frame_text) : fmt::format("{}, {}, {}", thread, frame_text, part);
}

std::string global_root_label(const std::string& symbol, const std::string& module, Address offset) {
  return offset ? fmt::format("global {}+0x{:x} in {}", symbol, offset, module)
                : fmt::format("global {} in {}", symbol, module);
}

const char* root_kind_name(RootKind k) {
  switch (k) {
    case RootKind::registers: return "register";
    case RootKind::stack: return "stack";
    case RootKind::global: return "global";
    case RootKind::tls: return "tls";
    case RootKind::dynamic_tls: return "dynamic_tls";
    case RootKind::anonymous: return "anonymous";
    case RootKind::exited_thread: return "exited_thread";
    case RootKind::finalizer: return "finalizer";
    case RootKind::interpreter_frame: return "interpreter_frame";
  }
  return "?";
}

const std::vector<Reg>& scanned_registers() {
  static const std::vector<Reg> regs = {Reg::rax, Reg::rbx, Reg::rcx, Reg::rdx, Reg::rsi, Reg::rdi,
                                        Reg::rbp, Reg::rsp, Reg::r8,  Reg::r9,  Reg::r10, Reg::r11,
                                        Reg::r12, Reg::r13, Reg::r14, Reg::r15, Reg::rip};
  return regs;
}

std::vector<RegisterWord> register_words(const ThreadState& thread) {
  std::vector<RegisterWord> words;
  for (Reg reg : scanned_registers()) words.push_back({static_cast<Address>(reg), thread.reg(reg)});
  for (int r = 0; r < VectorRegisters::kRegisters; ++r)
    for (int lane = 0; lane < thread.vector.lanes_read; ++lane)
      words.push_back({RegisterWord::kFirstVectorSlot + static_cast<Address>(r * VectorRegisters::kYmmLanes + lane),
                       thread.vector.lanes[r][lane]});
  return words;
}

std::string register_slot_name(Address slot) {
  if (slot < RegisterWord::kFirstVectorSlot) return register_name(static_cast<Reg>(slot));
  const Address lane_index = slot - RegisterWord::kFirstVectorSlot;
  return vector_register_name(static_cast<int>(lane_index / VectorRegisters::kYmmLanes),
                              static_cast<int>(lane_index % VectorRegisters::kYmmLanes));
}

RootSet collect_roots(const Image& image, const HeapModel& heap, const LibcThreads& threads,
                      LibcFinalizers finalizers) {
  RootSet roots;
  const Ranges heap_r = heap_ranges(heap);
  Ranges claimed;
  add_thread_roots(image, threads, heap_r, roots.ranges, claimed);
  add_exited_thread_roots(threads, roots.ranges, claimed);
  add_module_roots(image, roots.ranges, claimed, heap_r, roots.warnings);
  add_tls_roots(image, roots.ranges, claimed, heap_r);
  add_dynamic_tls_roots(image, heap, threads, roots.ranges);
  add_unclaimed_file_roots(image, roots.ranges, claimed, heap_r);
  add_anonymous_roots(image, roots.ranges, claimed, heap_r);
  roots.finalizers = std::move(finalizers.registrations);
  roots.finalizer_notes = std::move(finalizers.notes);
  add_finalizer_roots(image, roots);
  add_interpreter_frame_roots(image, heap, roots);
  if (heap.collector) mark_collector_roots(image, threads, roots, *heap.collector);
  return roots;
}

namespace {

// "stack of thread 2 (tid 4711) frame #3 process_batch() at worker.cpp:88 variable batch (sp+0x40)" (the
// variable when debug info places one there), or the frame-less
// "stack of thread 2 (tid 4711), sp+0x40" when no unwound frame holds the word.
std::string describe_stack_word(const Image& image, const RootRange& root, Address word,
                                const std::vector<std::vector<Frame>>* frames) {
  const std::string thread = thread_label(image, root.thread);
  // Words in the red zone lie below the stack pointer.
  const std::string from_sp = word >= root.anchor ? fmt::format("sp+0x{:x}", word - root.anchor)
                                                  : fmt::format("sp-0x{:x}", root.anchor - word);
  std::size_t index = 0;
  const Frame* frame =
      frames && root.thread < frames->size() ? frame_covering((*frames)[root.thread], word, &index) : nullptr;
  if (!frame) return fmt::format("{}, {}", thread_root_label(RootKind::stack, thread), from_sp);
  const FrameVariable* variable = frame->variable_at(word);
  return fmt::format("{} ({})",
                     frame_root_label(thread, index, *frame, variable ? variable->name : "", LabelDetail::exact),
                     from_sp);
}

}  // namespace

std::string describe_root(const Image& image, const SymbolIndex& symbols, const RootRange& root, Address word,
                          const std::vector<std::vector<Frame>>* frames) {
  switch (root.kind) {
    case RootKind::registers:
      return fmt::format("register {}, {}", register_slot_name(word), thread_label(image, root.thread));
    case RootKind::stack:
      return describe_stack_word(image, root, word, frames);
    case RootKind::global: {
      if (root.module == RootRange::kNoModule)
        return fmt::format("writable mapping of {} 0x{:x}-0x{:x} at +0x{:x}", root.label, root.start, root.end,
                           word - root.start);
      // Through the root's own module: .bss past the file's last page lies outside the module's mappings.
      const Module& mod = image.modules()[root.module];
      const std::string module(mod.name());
      const ModuleSymbols* syms = symbols.symbols_for(mod);
      if (const Symbol* s = syms ? syms->covering(word - mod.load_bias) : nullptr) {
        return global_root_label(demangle(s->name), module, word - mod.load_bias - s->value);
      }
      return fmt::format("global {}+0x{:x}", module, word - mod.load_bias);
    }
    case RootKind::tls: {
      const Address tp = image.threads()[root.thread].fs_base();
      const std::string variable = static_tls_variable(image, symbols, tp, word);
      const std::string place = word < tp ? fmt::format("tp-0x{:x}", tp - word) : fmt::format("tp+0x{:x}", word - tp);
      const std::string owner = thread_root_label(RootKind::tls, thread_label(image, root.thread));
      return variable.empty() ? fmt::format("{}, {}", owner, place) : fmt::format("{}: {}", owner, variable);
    }
    case RootKind::dynamic_tls:
      return fmt::format("{} (module id {}) at +0x{:x}",
                         thread_root_label(RootKind::dynamic_tls, thread_label(image, root.thread)), root.anchor,
                         word - root.start);
    case RootKind::anonymous:
      return fmt::format("{} 0x{:x}-0x{:x} at +0x{:x}", root.label.empty() ? "anonymous mapping" : root.label,
                         root.start, root.end, word - root.start);
    case RootKind::exited_thread:
      return fmt::format("descriptor of an exited thread {} (pthread_t 0x{:x}) at +0x{:x}",
                         root.in_stack_cache ? "in glibc's stack cache" : "that was never joined", root.anchor,
                         word - root.start);
    case RootKind::finalizer:
      return root.label;
    case RootKind::interpreter_frame:
      return interpreter_frame_label(interpreter_thread_label(image, root.thread), root.label, root.part);
  }
  return "?";
}

}  // namespace heapscope
