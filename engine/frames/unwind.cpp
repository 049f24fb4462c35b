#include "frames/unwind.h"

#include "base/progress.h"

#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <malloc.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <dwarf.h>
#include <fmt/format.h>

#include "symbols/module_symbols.h"

namespace heapscope {

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kUnwindTimeLimit = std::chrono::seconds(5);
constexpr unsigned kDwarfRsp = 7;
constexpr unsigned kDwarfRegisterCount = 17;  // rax..r15 and the return address column (rip)

// x86-64 DWARF register numbers 0..16 in Image register terms.
constexpr Reg kDwarfRegisters[kDwarfRegisterCount] = {
    Reg::rax, Reg::rdx, Reg::rcx, Reg::rbx, Reg::rsi, Reg::rdi, Reg::rbp, Reg::rsp, Reg::r8,
    Reg::r9,  Reg::r10, Reg::r11, Reg::r12, Reg::r13, Reg::r14, Reg::r15, Reg::rip};

struct ThreadArg {
  const Image* image = nullptr;
  std::size_t index = 0;
};

struct ProcessArg {
  const Image* image = nullptr;
  std::vector<ThreadArg> threads;
};

// libdw keeps the iteration's position in *thread_argp (null at the start). Thread ids handed to libdw are
// index + 1: real tids may repeat or be 0 in a damaged core.
pid_t next_thread(Dwfl*, void* dwfl_arg, void** thread_argp) {
  auto* process = static_cast<ProcessArg*>(dwfl_arg);
  const auto* previous = static_cast<const ThreadArg*>(*thread_argp);
  const std::size_t next = previous ? previous->index + 1 : 0;
  if (next >= process->threads.size()) return 0;
  *thread_argp = &process->threads[next];
  return static_cast<pid_t>(next + 1);
}

bool memory_read(Dwfl*, Dwarf_Addr addr, Dwarf_Word* result, void* dwfl_arg) {
  const auto value = static_cast<ProcessArg*>(dwfl_arg)->image->read_u64(addr);
  if (!value) return false;  // ends this thread's unwind: the stack is unreadable there
  *result = *value;
  return true;
}

bool set_initial_registers(Dwfl_Thread* thread, void* thread_arg) {
  const auto* arg = static_cast<const ThreadArg*>(thread_arg);
  const ThreadState& state = arg->image->threads()[arg->index];
  Dwarf_Word regs[kDwarfRegisterCount];
  for (unsigned i = 0; i < kDwarfRegisterCount; ++i) regs[i] = state.reg(kDwarfRegisters[i]);
  if (!dwfl_thread_state_registers(thread, 0, kDwarfRegisterCount, regs)) return false;
  dwfl_thread_state_register_pc(thread, state.reg(Reg::rip));
  return true;
}

const Dwfl_Thread_Callbacks kThreadCallbacks = {next_thread, nullptr, memory_read, set_initial_registers,
                                                 nullptr,     nullptr};

// A module's separate debug file is the one its symbols were loaded with (found locally or fetched from
// debuginfod by SymbolIndex, under the session's options), handed over as the module's userdata; libdw
// calls this only when the module file itself has no DWARF. It never searches on its own.
int use_symbols_debug_file(Dwfl_Module*, void** userdata, const char*, Dwarf_Addr, const char*, const char*,
                           GElf_Word, char** debuginfo_file_name) {
  const auto* path = static_cast<const std::string*>(*userdata);
  if (!path || path->empty()) return -1;
  const int fd = ::open(path->c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  *debuginfo_file_name = ::strdup(path->c_str());
  return fd;
}

const Dwfl_Callbacks kDwflCallbacks = {dwfl_build_id_find_elf, use_symbols_debug_file, dwfl_offline_section_address,
                                       nullptr};

struct DwflDeleter {
  void operator()(Dwfl* d) const { dwfl_end(d); }
};
using DwflPtr = std::unique_ptr<Dwfl, DwflDeleter>;

// The modules' DWARF the unwind has opened, held until it ends (DwarfFiles gives a file back once no one
// holds it: per frame, it would be inflated again and again).
class HeldDwarf {
 public:
  explicit HeldDwarf(const DwarfFiles& files) : files_(files) {}
  const DwarfFiles& files() const { return files_; }
  const DwarfFile* of(std::size_t module) {
    if (module >= held_.size()) held_.resize(module + 1);
    if (!held_[module]) held_[module] = files_.of(module);
    return held_[module].get();
  }

 private:
  const DwarfFiles& files_;
  std::vector<std::shared_ptr<const DwarfFile>> held_;  // by module; null: not opened, or no DWARF
};

struct FrameCollector {
  const Image& image;
  const SymbolIndex& symbols;
  HeldDwarf& dwarf;
  Dwfl* dwfl;
  Clock::time_point deadline;
  std::vector<std::vector<Frame>>* all = nullptr;
  std::vector<std::string>* warnings = nullptr;
  std::vector<Frame>* out = nullptr;  // the thread being unwound
  std::size_t thread_index = 0;
  bool timed_out = false;
  bool stopped = false;  // the unwind was interrupted
  bool corrupt = false;
};

std::string function_name(const FrameCollector& c, Dwfl_Module* mod, Address pc) {
  if (mod)
    if (const char* name = dwfl_module_addrname(mod, pc)) return demangle(name);
  const ResolvedSymbol resolved = c.symbols.resolve(pc);
  return resolved.symbol ? demangle(resolved.symbol->name) : std::string();
}

// "clangd+0x12e7a2": where a pc no symbol covers lies in its module (the offset from the module's
// link-time base, as objdump and addr2line take it); empty outside every module.
std::string module_offset(const FrameCollector& c, Address pc) {
  const ResolvedSymbol resolved = c.symbols.resolve(pc);
  if (!resolved.module) return {};
  return fmt::format("{}+0x{:x}", resolved.module->name(), pc - resolved.module->load_bias);
}

bool read_call_site(Dwarf_Die* cu, Dwarf_Die* inlined, Frame& frame) {
  const std::optional<Dwarf_Word> file_index = die_udata(*inlined, DW_AT_call_file);
  const std::optional<Dwarf_Word> line = die_udata(*inlined, DW_AT_call_line);
  if (!file_index || !line) return false;
  Dwarf_Files* files = nullptr;
  std::size_t count = 0;
  if (dwarf_getsrcfiles(cu, &files, &count) != 0 || *file_index >= count) return false;
  const char* name = dwarf_filesrc(files, *file_index, nullptr, nullptr);
  if (!name) return false;
  frame.file = name;
  frame.line = static_cast<int>(*line);
  return true;
}

// The concrete function DIE whose code holds pc (libdw's dwarf_getscopes follows an inlined function to its
// abstract definition instead, which has neither the caller's frame base nor its variables).
bool find_function_at(Dwarf_Die* parent, Dwarf_Addr pc, Dwarf_Die* found, int depth = 0) {
  Dwarf_Die child;
  if (depth > 8 || dwarf_child(parent, &child) != 0) return false;
  do {
    const int tag = dwarf_tag(&child);
    if (tag == DW_TAG_subprogram && dwarf_haspc(&child, pc) == 1) {
      *found = child;
      return true;
    }
    const bool container = tag == DW_TAG_namespace || tag == DW_TAG_class_type || tag == DW_TAG_structure_type;
    if (container && find_function_at(&child, pc, found, depth + 1)) return true;
  } while (dwarf_siblingof(&child, &child) == 0);
  return false;
}

// The scopes holding pc in a frame's code, outermost (the function) first: the function, then the lexical
// blocks and inlined calls nested in it. Empty without debug info.
struct ScopeChain {
  Dwarf_Die* cu = nullptr;
  Dwarf_Addr pc = 0;  // in the module's DWARF addresses
  std::vector<Dwarf_Die> scopes;
};

// The compilation unit whose code holds pc, in the DWARF of the module holding it (DwarfFiles: the file the
// type index reads), and pc in that DWARF's addresses. The file's lock is held while the unit lives: its
// DIEs are read meanwhile, and a type index may be being built from the same file on another thread.
struct CodeUnit {
  std::unique_lock<std::mutex> reading;
  Dwarf_Die die;
  Dwarf_Addr pc = 0;
};

std::optional<CodeUnit> code_unit(const Image& image, HeldDwarf& dwarf, Address pc) {
  const Module* module = image.module_at(pc);
  if (!module) return std::nullopt;
  const auto index = static_cast<std::size_t>(module - image.modules().data());
  const DwarfFile* file = dwarf.of(index);
  if (!file) return std::nullopt;
  CodeUnit unit{dwarf.files().lock(index), {}, pc - module->load_bias};
  if (!dwarf_addrdie(file->dwarf(), unit.pc, &unit.die)) return std::nullopt;
  return unit;
}

ScopeChain scope_chain(std::optional<CodeUnit>& unit) {
  constexpr std::size_t kMaxNesting = 64;
  ScopeChain chain;
  if (!unit) return chain;
  chain.cu = &unit->die;
  chain.pc = unit->pc;
  Dwarf_Die function;
  if (!find_function_at(chain.cu, chain.pc, &function)) return chain;
  chain.scopes.push_back(function);
  for (bool deeper = true; deeper && chain.scopes.size() < kMaxNesting;) {
    deeper = false;
    Dwarf_Die child;
    if (dwarf_child(&chain.scopes.back(), &child) != 0) break;
    do {
      const int tag = dwarf_tag(&child);
      if ((tag == DW_TAG_lexical_block || tag == DW_TAG_inlined_subroutine) && dwarf_haspc(&child, chain.pc) == 1) {
        chain.scopes.push_back(child);
        deeper = true;
        break;
      }
    } while (dwarf_siblingof(&child, &child) == 0);
  }
  return chain;
}

// In code inlined into the frame's function the line table names the inlined source (a header's helper),
// while the frame is labelled with the function's symbol: its own line is where the outermost inlined
// call sits.
bool add_outermost_call_site(std::optional<CodeUnit>& unit, Frame& frame) {
  ScopeChain chain = scope_chain(unit);
  for (Dwarf_Die& scope : chain.scopes)
    if (dwarf_tag(&scope) == DW_TAG_inlined_subroutine) return read_call_site(chain.cu, &scope, frame);
  return false;
}

void add_source_line(FrameCollector& c, Address pc, Frame& frame) {
  std::optional<CodeUnit> unit = code_unit(c.image, c.dwarf, pc);
  if (!unit || add_outermost_call_site(unit, frame)) return;
  Dwarf_Line* line = dwarf_getsrc_die(&unit->die, unit->pc);
  int lineno = 0;
  if (!line || dwarf_lineno(line, &lineno) != 0) return;
  if (const char* file = dwarf_linesrc(line, nullptr, nullptr)) {
    frame.file = file;
    frame.line = lineno;
  }
}

// A return address points after the call; the call itself is looked up.
Address lookup_pc(const Frame& frame) { return frame.is_activation || frame.pc == 0 ? frame.pc : frame.pc - 1; }

// The frame's function, else its module and offset, and its source line; `mod` is libdw's module of the
// pc when there is one (its symbol table), else the SymbolIndex names it.
void name_frame(FrameCollector& c, Dwfl_Module* mod, Frame& frame) {
  const Address lookup = lookup_pc(frame);
  frame.function = function_name(c, mod, lookup);
  if (frame.function.empty()) frame.module_offset = module_offset(c, frame.pc);
  add_source_line(c, lookup, frame);
}

int collect_frame(Dwfl_Frame* state, void* arg) {
  auto& c = *static_cast<FrameCollector*>(arg);
  if (Clock::now() > c.deadline) {
    c.timed_out = true;
    return DWARF_CB_ABORT;
  }
  // Ctrl-C: stop here, and say so once back from libdw (an exception must not cross its C frames).
  try {
    progress_check();
  } catch (const Interrupted&) {
    c.stopped = true;
    return DWARF_CB_ABORT;
  }
  Frame frame;
  if (!dwfl_frame_pc(state, &frame.pc, &frame.is_activation)) return DWARF_CB_ABORT;
  Dwarf_Word sp = 0;
  if (dwfl_frame_reg(state, kDwarfRsp, &sp) != 0) {
    // Without its stack pointer a caller's frame has no known extent (nor has its callee's): stop here.
    if (!c.out->empty()) return DWARF_CB_ABORT;
    sp = c.image.threads()[c.thread_index].sp();
  }
  if (!c.out->empty()) {
    // Stacks grow down: a caller below its callee means the unwind went astray.
    if (sp < c.out->back().sp_low) {
      c.corrupt = true;
      return DWARF_CB_ABORT;
    }
    c.out->back().sp_high = sp;
  }
  frame.sp_low = frame.sp_high = sp;
  name_frame(c, dwfl_addrmodule(c.dwfl, lookup_pc(frame)), frame);
  c.out->push_back(std::move(frame));
  return c.out->size() >= kMaxFramesPerThread ? DWARF_CB_ABORT : DWARF_CB_OK;
}

// The outermost frame reaches to the end of the stack mapping.
void close_outermost_frame(const Image& image, std::vector<Frame>& frames) {
  if (frames.empty()) return;
  Frame& last = frames.back();
  if (const MemoryRegion* region = image.region_at(last.sp_low)) last.sp_high = region->end;
}

// A type's size in bytes through qualifiers and typedefs; 8 (a pointer's) when DWARF does not say.
Dwarf_Word type_size(Dwarf_Die* variable) {
  Dwarf_Attribute attr;
  Dwarf_Die type;
  Dwarf_Word size = 0;
  if (dwarf_attr_integrate(variable, DW_AT_type, &attr) && dwarf_formref_die(&attr, &type) &&
      dwarf_aggregate_size(&type, &size) == 0 && size > 0)
    return size;
  return 8;
}

// The offset from the frame base when the variable lives at DW_OP_fbreg <offset> at `pc`.
std::optional<Dwarf_Sword> frame_base_offset(Dwarf_Die* variable, Dwarf_Addr pc) {
  Dwarf_Attribute attr;
  if (!dwarf_attr_integrate(variable, DW_AT_location, &attr)) return std::nullopt;
  Dwarf_Op* ops = nullptr;
  std::size_t op_count = 0;
  if (dwarf_getlocation_addr(&attr, pc, &ops, &op_count, 1) != 1 || op_count != 1 || ops[0].atom != DW_OP_fbreg)
    return std::nullopt;
  return static_cast<Dwarf_Sword>(ops[0].number);
}

// gcc's x86-64 frame base is the CFA; any other frame base is not followed.
bool frame_base_is_cfa(Dwarf_Die* subprogram) {
  Dwarf_Attribute attr;
  Dwarf_Op* ops = nullptr;
  std::size_t op_count = 0;
  return dwarf_attr_integrate(subprogram, DW_AT_frame_base, &attr) && dwarf_getlocation(&attr, &ops, &op_count) == 0 &&
         op_count == 1 && ops[0].atom == DW_OP_call_frame_cfa;
}

void add_scope_variables(Dwarf_Die* scope, Dwarf_Addr pc, Address cfa, std::vector<FrameVariable>& out) {
  Dwarf_Die child;
  if (dwarf_child(scope, &child) != 0) return;
  do {
    const int tag = dwarf_tag(&child);
    if (tag != DW_TAG_variable && tag != DW_TAG_formal_parameter) continue;
    const char* name = dwarf_diename(&child);
    const auto offset = frame_base_offset(&child, pc);
    if (!name || !offset) continue;
    const Address start = cfa + static_cast<Address>(*offset);
    Dwarf_Attribute attr;
    Dwarf_Die type;
    const bool typed = dwarf_attr_integrate(&child, DW_AT_type, &attr) && dwarf_formref_die(&attr, &type);
    out.push_back({name, start, start + type_size(&child), typed ? dwarf_dieoffset(&type) : 0});
  } while (dwarf_siblingof(&child, &child) == 0);
}

// Variables of the scopes around pc (inlined ones included), innermost first, so inner ones shadow.
std::vector<FrameVariable> frame_variables(FrameCollector& c, Address pc, Address cfa) {
  std::vector<FrameVariable> variables;
  std::optional<CodeUnit> unit = code_unit(c.image, c.dwarf, pc);
  ScopeChain chain = scope_chain(unit);
  if (chain.scopes.empty() || !frame_base_is_cfa(&chain.scopes.front())) return variables;
  for (auto scope = chain.scopes.rbegin(); scope != chain.scopes.rend(); ++scope)
    add_scope_variables(&*scope, chain.pc, cfa, variables);
  return variables;
}

// On x86-64 a frame's CFA is its caller's stack pointer, known once the caller is unwound.
void add_frame_variables(FrameCollector& c, std::vector<Frame>& frames) {
  for (std::size_t i = 0; i + 1 < frames.size(); ++i) {
    Frame& f = frames[i];
    const Address lookup = f.is_activation || f.pc == 0 ? f.pc : f.pc - 1;
    f.variables = frame_variables(c, lookup, frames[i + 1].sp_low);
  }
}

int unwind_one_thread(Dwfl_Thread* thread, void* arg) {
  auto& c = *static_cast<FrameCollector*>(arg);
  const std::size_t index = static_cast<std::size_t>(dwfl_thread_tid(thread)) - 1;
  if (index >= c.all->size()) return DWARF_CB_OK;
  c.out = &(*c.all)[index];
  c.thread_index = index;
  c.corrupt = false;
  // Errors at the end of a stack are normal (libdw reports the last frame's missing CFI as one).
  dwfl_thread_getframes(thread, collect_frame, &c);
  add_frame_variables(c, *c.out);
  close_outermost_frame(c.image, *c.out);
  if (c.corrupt && c.warnings)
    c.warnings->push_back(fmt::format("stack of thread tid {} looks corrupt; its unwind stops at frame #{}",
                                      c.image.threads()[index].tid, c.out->size() - 1));
  return c.timed_out || c.stopped ? DWARF_CB_ABORT : DWARF_CB_OK;
}

DwflPtr report_modules(const Image& image, const SymbolIndex& symbols, std::vector<std::string>* warnings) {
  DwflPtr dwfl(dwfl_begin(&kDwflCallbacks));
  if (!dwfl) return dwfl;
  dwfl_report_begin(dwfl.get());
  for (const Module& m : image.modules()) {
    if (m.file_on_disk.empty()) continue;
    const std::string name(m.name());
    Dwfl_Module* mod = dwfl_report_elf(dwfl.get(), name.c_str(), m.file_on_disk.c_str(), -1, m.load_bias, true);
    if (!mod) {
      if (warnings) warnings->push_back(fmt::format("unwinding: cannot use {} ({})", m.file_on_disk, dwfl_errmsg(-1)));
      continue;
    }
    // The string lives in the SymbolIndex, which outlives the unwind.
    const ModuleSymbols* module_symbols = symbols.symbols_for(m);
    void** userdata = nullptr;
    if (module_symbols && !module_symbols->debug_file().empty() &&
        dwfl_module_info(mod, &userdata, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr) && userdata)
      *userdata = const_cast<std::string*>(&module_symbols->debug_file());
  }
  if (dwfl_report_end(dwfl.get(), nullptr, nullptr) != 0) return nullptr;
  return dwfl;
}

std::vector<std::vector<Frame>> unwind_with_libdw(const Image& image, const SymbolIndex& symbols,
                                                  const DwarfFiles& dwarf, std::vector<std::string>* warnings) {
  const auto& threads = image.threads();
  std::vector<std::vector<Frame>> frames(threads.size());
  if (threads.empty()) return frames;
  DwflPtr dwfl = report_modules(image, symbols, warnings);
  ProcessArg process{&image, {}};
  for (std::size_t i = 0; i < threads.size(); ++i) process.threads.push_back({&image, i});
  if (!dwfl || !dwfl_attach_state(dwfl.get(), nullptr, image.pid() > 0 ? image.pid() : 1, &kThreadCallbacks,
                                  &process)) {
    if (warnings) warnings->push_back(fmt::format("cannot unwind thread stacks: {}", dwfl_errmsg(-1)));
    return frames;
  }
  HeldDwarf held(dwarf);
  FrameCollector collector{image, symbols, held, dwfl.get(), Clock::now() + kUnwindTimeLimit, &frames, warnings};
  dwfl_getthreads(dwfl.get(), unwind_one_thread, &collector);
  if (collector.stopped) progress_check();  // throws Interrupted
  if (collector.timed_out && warnings)
    warnings->push_back("unwinding thread stacks took too long; some threads have partial or no frames");
  return frames;
}

}  // namespace

std::vector<std::vector<Frame>> unwind_threads(const Image& image, const SymbolIndex& symbols,
                                               const DwarfFiles& dwarf, std::vector<std::string>* warnings) {
  std::vector<std::vector<Frame>> frames = unwind_with_libdw(image, symbols, dwarf, warnings);
  // libdwfl's state is gone now (its modules' files, abbreviation tables, CFI), but in
  // small blocks that malloc keeps for reuse: give their pages back, or they stay in the process's
  // footprint through the analyses that follow (5 % of `roots` at 1M blocks).
  ::malloc_trim(0);
  return frames;
}

std::string Frame::describe() const {
  const std::string_view base = std::string_view(file).substr(file.rfind('/') == std::string::npos ? 0 : file.rfind('/') + 1);
  // A source location without code (an interpreter's traceback keeps files and lines alone): "app.py:31".
  if (function.empty() && module_offset.empty() && pc == 0 && !file.empty()) return fmt::format("{}:{}", base, line);
  std::string out = !function.empty()        ? (function.find('(') == std::string::npos ? function + "()" : function)
                    : !module_offset.empty() ? module_offset
                                             : fmt::format("0x{:x}", pc);
  if (!file.empty()) out += fmt::format(" at {}:{}", base, line);
  return out;
}

std::vector<Frame> symbolize_return_addresses(const Image& image, const SymbolIndex& symbols, const DwarfFiles& dwarf,
                                              std::span<const Address> return_addresses) {
  HeldDwarf held(dwarf);
  FrameCollector c{image, symbols, held, nullptr, Clock::now()};
  std::vector<Frame> out;
  out.reserve(return_addresses.size());
  for (const Address pc : return_addresses) {
    Frame frame;
    frame.pc = pc;
    name_frame(c, nullptr, frame);
    out.push_back(std::move(frame));
  }
  return out;
}

const Frame* frame_covering(const std::vector<Frame>& frames, Address address, std::size_t* index) {
  for (std::size_t i = 0; i < frames.size(); ++i) {
    if (!frames[i].covers(address)) continue;
    if (index) *index = i;
    return &frames[i];
  }
  return nullptr;
}

}  // namespace heapscope
