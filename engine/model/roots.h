// Roots: the memory a program can reach without going through the heap. Every root carries its kind and
// enough context to be labelled for a person ("register rbx, thread 3 (tid 1234)", "global g_cache+0x10
// in libfoo.so").
#pragma once

#include <string>
#include <vector>

#include "frames/unwind.h"
#include "heap/heap_model.h"
#include "image/image.h"
#include "runtime/libc_runtime.h"
#include "symbols/symbol_index.h"

namespace heapscope {

enum class RootKind : std::uint8_t {
  registers,  // a thread's general and vector registers
  stack,      // a thread's stack, from its stack pointer (less the red zone) to the end of the mapping
  global,     // writable PT_LOAD ranges (.data, .bss) of a module, and writable file mappings no module file claimed
  tls,        // a thread's static TLS and thread control block
  dynamic_tls,  // a TLS block of a dlopen'ed module, reached through a thread's DTV
  anonymous,  // other anonymous writable memory that is neither heap nor a stack (custom mmaps, ld.so's own allocations)
  exited_thread,  // the descriptor (struct pthread) of an exited thread glibc still keeps; its stack is dead
  finalizer,  // what an exit handler, thread_local destructor or pthread key destructor will receive
              // (runtime/libc_runtime.h); carved out of the roots above, so no byte counts twice
  interpreter_frame,  // an interpreter's frame in memory of its own (HeapModel::interpreter_frames: a Python
                      // function's locals), carved out of the root that covers it
};
// "thread 3 (tid 1234)" for the thread at `index` of Image::threads() (numbered from 1, as debuggers do).
std::string thread_label(const Image& image, std::uint32_t index);

// The one wording of root labels, shared by the three places that name roots: a word inside a root
// (describe_root, for retainer paths), the root nodes retention groups words into (RootNode::label), and
// the stable labels that match roots across snapshots (no thread ids or addresses: LabelDetail::stable).
enum class LabelDetail { exact, stable };
// "registers of T", "stack of T", "static TLS of T", "dynamic TLS of T" for the thread T.
std::string thread_root_label(RootKind kind, const std::string& thread);
// exact: "stack of T frame #2 f() at a.c:10 variable v"; stable: "stack of T in f variable v".
std::string frame_root_label(const std::string& thread, std::size_t index, const Frame& frame,
                             const std::string& variable, LabelDetail detail);
// The thread an interpreter's frame runs on: thread_label, or "a thread heapscope does not see" for
// RootRange::kNoThread.
std::string interpreter_thread_label(const Image& image, std::uint32_t thread);
// "python frame handle() at app.py:42"; stable: "python frame handle() in app.py".
std::string interpreter_frame_text(const InterpreterFrame& frame, LabelDetail detail);
// "thread 1 (tid 42), python frame handle() at app.py:42, local cache" (`part`: "local cache"); no part: the
// frame's other words.
std::string interpreter_frame_label(const std::string& thread, const std::string& frame_text, const std::string& part);
// "global g in app", "global g+0x8 in app".
std::string global_root_label(const std::string& symbol, const std::string& module, Address offset = 0);

// "register", "stack", "global", "tls", "dynamic_tls", "anonymous", "exited_thread", "finalizer",
// "interpreter_frame"
const char* root_kind_name(RootKind k);

struct RootRange {
  RootKind kind = RootKind::global;
  Address start = 0, end = 0;  // for registers: unused (values are in register_values)
  // index into Image::threads() (registers, stack, tls, dynamic_tls, interpreter_frame: kNoThread when the
  // frame's thread is not among them)
  std::uint32_t thread = 0;
  static constexpr std::uint32_t kNoThread = ~std::uint32_t{0};
  static constexpr std::uint32_t kNoModule = ~std::uint32_t{0};
  // index into Image::modules() (global); kNoModule for a writable file mapping no module holds (then
  // `label` is the mapped file's path)
  std::uint32_t module = 0;
  // stack: the thread's stack pointer; dynamic_tls: the module id; exited_thread: pthread_t; finalizer: the
  // registration (index into RootSet::finalizers); interpreter_frame: the frame (index into
  // HeapModel::interpreter_frames)
  Address anchor = 0;
  bool in_stack_cache = false;  // exited_thread: detached or joined, its stack kept by glibc for reuse
  // finalizer: the range's words are addresses complemented (FinalizerRegistration::hidden_pointer)
  bool hidden_pointer = false;
  // A root of a garbage collector's heap too, by its rules (HeapModel::collector): threads, modules' data,
  // what the program registered, less what it excluded. Every range is a root of malloc's heap.
  bool collector_root = false;
  // finalizer: "exit handler close_channel(void*) (cxa_atexit) argument"; global: see module; anonymous:
  // "registered with the collector" for a registered root in memory no other root covers (a malloc block);
  // interpreter_frame: the frame's label ("python frame handle() at app.py:42")
  std::string label;
  // interpreter_frame: what the word is in its frame ("local cache", "globals"); empty: the frame's other words
  std::string part;
};

struct RootSet {
  std::vector<RootRange> ranges;
  std::vector<FinalizerRegistration> finalizers;  // every registration, holding memory or not
  std::vector<std::string> warnings;         // what the roots' own collection ran into
  std::vector<std::string> finalizer_notes;  // how the finalizer lists were found without libc's symbols
};

// Collects the roots of an image, each marked whether it is a root of a collector's heap as well (split
// where a registered or excluded range begins or ends). Heap memory (arena heaps and mmapped chunks) is never a root, and
// neither is allocator metadata: only allocated blocks become graph targets. The stacks of exited threads
// (glibc's thread list) are dead memory and no root either; only their descriptors are. A finalizer
// registration's slot is taken out of whatever other root covered it; a slot inside a heap block (an
// exit_function_list beyond the first, a second-level pthread key array, a dtor_list node) is a root and
// stays an edge of that block as well.
// The C library's thread list and registrations come in already read (the session reads them once; their
// warnings are theirs, not the roots').
RootSet collect_roots(const Image& image, const HeapModel& heap, const LibcThreads& threads,
                      LibcFinalizers finalizers);

// The label of a finalizer root: "exit handler close_channel(void*) (cxa_atexit) argument", "thread_local
// destructor std::vector<char>::~vector() of t_feed in app (thread 1 (tid 42))", "pthread key 3 destructor
// free_scratch(void*) data (thread 2 (tid 43))".
std::string finalizer_label(const Image& image, const FinalizerRegistration& reg);

// "register rbx, thread 3 (tid 1234)", "stack of thread 1 (tid 99), sp+0x40", "global g_list in app", ...
// `word` is the address of the pointer inside the root (for registers: RegisterWord::slot). With the threads'
// `frames` (Session::frames()), a stack word is named by the frame that holds it: "stack of thread 1
// (tid 99) frame #3 process_batch() at worker.cpp:88 variable batch (sp+0x40)".
std::string describe_root(const Image& image, const SymbolIndex& symbols, const RootRange& root, Address word,
                          const std::vector<std::vector<Frame>>* frames = nullptr);

// The registers a root scan reads: the general-purpose ones (segment registers and orig_rax excluded).
const std::vector<Reg>& scanned_registers();

// One word of a thread's registers that a root scan reads. `slot` names the register, and is the `word`
// describe_root takes for a register root: a Reg index for a general register, kFirstVectorSlot +
// register × VectorRegisters::kYmmLanes + lane for a lane of a vector register.
struct RegisterWord {
  static constexpr Address kFirstVectorSlot = 64;
  Address slot = 0;
  std::uint64_t value = 0;
};
// The scanned general registers, then every vector register lane the image read.
std::vector<RegisterWord> register_words(const ThreadState& thread);
// "rbx", "xmm0" (either lane of it), "ymm3" (its upper half).
std::string register_slot_name(Address slot);

}  // namespace heapscope
