#include "runtime/cpython/cpython_frames.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <set>

#include "base/phase_timer.h"
#include "base/progress.h"
#include "runtime/cpython/cpython_layout.h"

namespace heapscope::cpython {

namespace {

// Where each release keeps what the frame chain is read from (bytes), besides its StateLayout.
struct FrameLayout {
  Address state_cframe;         // _PyCFrame* (3.11, 3.12); 0: the state holds the current frame itself
  Address state_current_frame;  // 3.13: PyThreadState.current_frame
  Address cframe_current_frame;
  Address frame_code, frame_previous, frame_instruction, frame_stacktop, frame_is_entry, frame_owner, frame_localsplus;
  Address frame_function, frame_globals, frame_builtins, frame_locals_dict;
  Address code_localsplusnames, code_filename, code_qualname, code_nlocalsplus, code_stacksize, code_firstlineno,
      code_linetable;
};

std::optional<FrameLayout> frame_layout(int minor) {
  switch (minor) {
    case 11: return FrameLayout{56, 0, 8, 32, 48, 56, 64, 68, 69, 72, 0, 8, 16, 24, 96, 112, 128, 76, 68, 72, 136};
    case 12: return FrameLayout{56, 0, 0, 0, 8, 56, 64, 0, 70, 72, 16, 24, 32, 40, 96, 112, 128, 72, 64, 68, 136};
    case 13: return FrameLayout{0, 72, 0, 0, 8, 56, 64, 0, 70, 72, 16, 24, 32, 40, 96, 112, 128, 72, 64, 68, 136};
    default: return std::nullopt;
  }
}

constexpr std::uint8_t kOwnedByThread = 0;  // the frame lives on its thread's data stack
constexpr std::uint8_t kOwnedByCStack = 3;  // 3.12+: the entry frame of a call from C
constexpr std::size_t kMostFrames = 10000;   // a chain longer than any recursion limit leads astray
constexpr std::uint64_t kLongestName = 4096;
constexpr std::uint64_t kLongestTable = std::uint64_t{1} << 20;
constexpr Address kTupleItems = 24, kBytesSize = 16, kBytesData = 32;

// A little-endian base-64 number of the locations table (6 bits a byte, bit 6 set: more follow).
std::uint64_t read_varint(std::span<const std::uint8_t> table, std::size_t& at) {
  std::uint64_t value = 0;
  for (unsigned shift = 0; at < table.size() && shift < 64; shift += 6) {
    const std::uint8_t byte = table[at++];
    value |= std::uint64_t{byte & 63u} << shift;
    if (!(byte & 64)) break;
  }
  return value;
}

std::int64_t read_signed_varint(std::span<const std::uint8_t> table, std::size_t& at) {
  const std::uint64_t value = read_varint(table, at);
  return value & 1 ? -static_cast<std::int64_t>(value >> 1) : static_cast<std::int64_t>(value >> 1);
}

// The words of one thread's frames, read through `layout`.
class FrameReader {
 public:
  FrameReader(const Image& image, const StateLayout& state, const FrameLayout& layout, int minor)
      : image_(image), s_(state), l_(layout), minor_(minor) {}

  // The frames of the thread whose data stack is `stack`, into `out`; the slots of their value stacks known
  // to be spent, into `spent`.
  void read_thread(const DataStack& stack, std::vector<InterpreterFrame>& out, std::vector<HeapSegment>& spent) {
    const Address state = stack.fields - s_.state_data_stack;
    const auto tid = image_.read_u64(state + s_.state_native_thread_id);
    std::optional<std::uint64_t> frame;
    if (l_.state_cframe) {
      const auto cframe = image_.read_u64(state + l_.state_cframe);
      frame = cframe && *cframe ? image_.read_u64(*cframe + l_.cframe_current_frame) : std::nullopt;
    } else {
      frame = image_.read_u64(state + l_.state_current_frame);
    }
    std::set<Address> seen;
    // Whether the frame met before (the one this one called) was called from Python code: then this frame
    // saved its value stack's top before the call. A frame entered from C (3.11: is_entry; 3.12+: below a
    // C stack's entry frame) says nothing of its caller's stack, and the innermost frame runs.
    bool called_from_python = false;
    for (Address at = frame.value_or(0); at && at % 8 == 0 && seen.size() < kMostFrames; ) {
      if (!seen.insert(at).second) break;
      std::uint64_t head[10] = {};  // up to the locals
      if (!image_.read_exact(at, head, sizeof head)) break;
      const auto byte = [&](Address offset) { return static_cast<std::uint8_t>(head[offset / 8] >> (8 * (offset % 8))); };
      const std::uint8_t owner = byte(l_.frame_owner);
      const MemoryRegion* region = image_.region_at(at);
      // The innermost frame of the chunk in use ends where the thread's data stack does; one of an earlier
      // chunk, by its chunk's end.
      const Address bound = at >= stack.chunk && at < stack.top ? stack.top : region ? region->end : 0;
      if (owner == kOwnedByThread && at < bound && region && region->backing_path.empty()) {
        const auto stacktop = static_cast<std::int32_t>(head[l_.frame_stacktop / 8]);
        if (std::optional<InterpreterFrame> f = frame_at(at, bound, head[l_.frame_code / 8], head[l_.frame_instruction / 8],
                                                         called_from_python ? std::optional(stacktop) : std::nullopt,
                                                         spent)) {
          f->tid = tid && *tid <= 0xffffffffu ? static_cast<std::uint32_t>(*tid) : 0;
          out.push_back(std::move(*f));
        }
      }
      called_from_python = owner != kOwnedByCStack && !(l_.frame_is_entry && byte(l_.frame_is_entry));
      at = head[l_.frame_previous / 8];
    }
  }

 private:
  // The frame at `at` running `code`, if `code` is a code object; its words end by `bound` at the latest.
  // `stacktop`: its value stack's top, when it saved it (in slots from its locals' start).
  std::optional<InterpreterFrame> frame_at(Address at, Address bound, Address code, Address instruction,
                                           std::optional<std::int32_t> stacktop, std::vector<HeapSegment>& spent) {
    if (!code || !has_type_named(image_, code, "code")) return std::nullopt;
    InterpreterFrame f;
    f.function = text_at(code + l_.code_qualname).value_or("?");
    f.file = text_at(code + l_.code_filename).value_or("?");
    const std::int32_t nlocalsplus = int_at(code + l_.code_nlocalsplus), stacksize = int_at(code + l_.code_stacksize);
    if (nlocalsplus < 0 || nlocalsplus > 1 << 16 || stacksize < 0 || stacksize > 1 << 16) return std::nullopt;
    const Address locals = at + l_.frame_localsplus;
    // Its locals, then its value stack up to the top it saved; whole when it saved none (a running frame
    // does not say where the top is: as a C frame's spills, a slot above it is the frame's until reused).
    const Address whole = std::min(bound, locals + static_cast<Address>(nlocalsplus + stacksize) * 8);
    f.start = at;
    f.end = whole;
    if (stacktop && *stacktop >= nlocalsplus && *stacktop <= nlocalsplus + stacksize) {
      f.end = std::min(whole, locals + static_cast<Address>(*stacktop) * 8);
      if (f.end < whole) spent.push_back({f.end, whole});
    }
    // The references the frame itself holds, then its locals by name.
    for (const auto& [offset, name] : {std::pair{l_.frame_function, "function"}, std::pair{l_.frame_globals, "globals"},
                                       std::pair{l_.frame_builtins, "builtins"}, std::pair{l_.frame_locals_dict, "locals dict"}})
      f.locals.push_back({at + offset, name});
    std::sort(f.locals.begin(), f.locals.end(), [](const auto& a, const auto& b) { return a.at < b.at; });
    const auto names = image_.read_u64(code + l_.code_localsplusnames);
    for (std::int32_t i = 0; i < nlocalsplus; ++i) {
      const auto name = names ? image_.read_u64(*names + kTupleItems + static_cast<Address>(i) * 8) : std::nullopt;
      const std::optional<std::string> text = name ? text_at_object(*name) : std::nullopt;
      f.locals.push_back({locals + static_cast<Address>(i) * 8, text ? "local " + *text : fmt::format("local #{}", i)});
    }
    f.line = line_at(code, instruction);
    return f;
  }

  std::int32_t int_at(Address field) { return static_cast<std::int32_t>(image_.read_u32(field).value_or(0)); }

  std::optional<std::string> text_at(Address field) {
    const auto object = image_.read_u64(field);
    return object && *object ? text_at_object(*object) : std::nullopt;
  }
  std::optional<std::string> text_at_object(Address object) { return ascii_text(image_, object, minor_, kLongestName); }

  std::uint32_t line_at(Address code, Address instruction) {
    const auto first_line = static_cast<std::uint32_t>(int_at(code + l_.code_firstlineno));
    const auto table = image_.read_u64(code + l_.code_linetable);
    const auto size = table ? image_.read_u64(*table + kBytesSize) : std::nullopt;
    if (!size || *size > kLongestTable) return first_line;
    std::vector<std::uint8_t> bytes(*size);
    if (!image_.read_exact(*table + kBytesData, bytes.data(), bytes.size())) return first_line;
    // Code units of two bytes from the code's start; before 3.13 the frame points at the last one executed
    // (one before the start when none has been), 3.13 at the one executing.
    const Address start = code + code_instructions_offset(minor_);
    const std::int64_t unit = (static_cast<std::int64_t>(instruction) - static_cast<std::int64_t>(start)) / 2;
    if (unit < 0) return first_line;
    const std::uint32_t line = line_of_instruction(bytes, first_line, unit);
    return line ? line : first_line;
  }

  const Image& image_;
  const StateLayout& s_;
  const FrameLayout& l_;
  const int minor_;
};

}  // namespace

std::uint32_t line_of_instruction(std::span<const std::uint8_t> table, std::uint32_t first_line, std::int64_t instruction) {
  std::int64_t line = first_line, unit = 0;
  for (std::size_t at = 0; at < table.size();) {
    const std::uint8_t head = table[at++];
    if (!(head & 128)) return 0;  // not an entry's first byte: a table this does not read
    const unsigned code = (head >> 3) & 15;
    const std::int64_t length = (head & 7) + 1;
    bool located = true;
    if (code == 15) {
      located = false;  // no location
    } else if (code == 14) {  // long form: line delta, end line delta, column, end column
      line += read_signed_varint(table, at);
      read_varint(table, at);
      read_varint(table, at);
      read_varint(table, at);
    } else if (code == 13) {  // no columns: a line delta
      line += read_signed_varint(table, at);
    } else if (code >= 10) {  // one line: the delta in the code, then the two columns
      line += code - 10;
      at += 2;
    } else {  // short form: the same line, a column byte
      at += 1;
    }
    if (instruction < unit + length) return located && line > 0 ? static_cast<std::uint32_t>(line) : 0;
    unit += length;
  }
  return 0;
}

std::vector<InterpreterFrame> python_frames(const Image& image, const std::vector<DataStack>& stacks, int minor,
                                            std::vector<HeapSegment>& spent) {
  std::vector<InterpreterFrame> out;
  const std::optional<StateLayout> state = state_layout(minor);
  const std::optional<FrameLayout> layout = frame_layout(minor);
  if (!state || !layout) return out;
  PhaseTimer timer("walk: Python frames");
  FrameReader reader(image, *state, *layout, minor);
  std::set<Address> states;
  for (const DataStack& s : stacks) {
    progress_check();
    if (states.insert(s.fields).second) reader.read_thread(s, out, spent);
  }
  return out;
}

}  // namespace heapscope::cpython
