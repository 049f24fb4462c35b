#include "runtime/glibc/glibc_finalizers.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <unordered_set>

#include "elf/elf_file.h"
#include "image/link_map.h"
#include "image/word_scan.h"
#include "runtime/module_data.h"
#include "runtime/static_tls.h"

namespace heapscope {

namespace {

// tcbhead_t.pointer_guard: fixed by glibc's x86-64 ABI (the compiler's stack protector reads the canary
// next to it at %fs:0x28), and the same in every thread.
constexpr Address kPointerGuardOffset = 0x30;

// struct exit_function_list {next; size_t idx; struct exit_function fns[32]}, each exit_function being
// {long flavor; union {at; on {fn, arg}; cxa {fn, arg, dso_handle}}}: glibc's own (stdlib/exit.h), not
// described by any descriptor, stable since the union gained cxa.
constexpr std::uint64_t kExitFunctionsPerList = 32;
constexpr std::size_t kExitEntryWords = 4;
constexpr std::size_t kExitListWords = 2 + kExitFunctionsPerList * kExitEntryWords;
enum ExitFlavor : std::uint64_t { ef_free, ef_us, ef_on, ef_at, ef_cxa };

// struct dtor_list {func (mangled); obj; struct link_map* map; next} (stdlib/cxa_thread_atexit_impl.c).
constexpr std::size_t kDtorNodeWords = 4;
constexpr std::size_t kMaxChain = 1 << 16;  // longer lists are damage, not registrations

// Inside a module and not in writable memory. Image sources do not all know which mappings are
// executable: LLDB lists a core's text, which the core omits, as unreadable or not at all.
bool is_code(const Image& image, Address a) {
  if (!image.module_at(a)) return false;
  const MemoryRegion* r = image.region_at(a);
  return !r || r->executable || !r->writable;
}

std::optional<std::uint64_t> pointer_guard(const Image& image) {
  for (const ThreadState& t : image.threads())
    if (t.fs_base())
      if (const auto guard = image.read_u64(t.fs_base() + kPointerGuardOffset)) return guard;
  return std::nullopt;
}

void name_function(const SymbolIndex& symbols, FinalizerRegistration& reg) {
  const ResolvedSymbol where = symbols.resolve(reg.function);
  reg.module = where.module ? std::string(where.module->name()) : std::string();
  reg.function_name = where.symbol && where.offset == 0 ? demangle(where.symbol->name)
                                                        : symbols.describe(reg.function);
}

// The writable PT_LOAD ranges of a module (.data, .bss), where libc keeps `initial` and `__exit_funcs`.
WritableRanges writable_ranges(const Module& module, const SymbolIndex& symbols) {
  const ModuleSymbols* syms = symbols.symbols_for(module);
  return syms ? writable_ranges(module, *syms) : WritableRanges{};
}

// ---- exit handlers ----

// The chain from `initial` back: the word of libc's data that points at a chain of lists ending at
// `initial` (`__exit_funcs`; lists beyond the first 32 handlers are malloc'ed and put in front).
Address exit_list_head(const Image& image, const HeapModel& heap, const std::vector<std::pair<Address, Address>>& ranges,
                       Address initial, std::uint64_t guard) {
  Address best = initial;
  std::size_t best_length = 1;
  auto chain_length = [&](Address list) -> std::size_t {
    for (std::size_t n = 1; n < kMaxChain; ++n) {
      if (list == initial) return n;
      const auto l = read_exit_function_list(image, list, guard);
      if (!l || l->next == 0) return 0;
      list = l->next;
    }
    return 0;
  };
  for (const auto& [start, end] : ranges)
    for_each_word(image, start, end, [&](Address at, std::uint64_t word) {
      if (word == initial || (at >= initial && at < initial + kExitListWords * 8)) return;
      const Block* b = heap.block_containing(word);
      if (!b || !is_allocated(b->state) || b->address() != word) return;  // later lists are malloc'ed
      const std::size_t n = chain_length(word);
      if (n > best_length) best = word, best_length = n;
    });
  return best;
}

std::optional<Address> exit_list_by_symbol(const Image& image, const Module& libc, const SymbolIndex& symbols) {
  const ModuleSymbols* syms = symbols.symbols_for(libc);
  const Symbol* s = syms ? syms->find("__exit_funcs") : nullptr;
  if (!s || s->kind != SymbolKind::object) return std::nullopt;
  return image.read_u64(libc.load_bias + s->value);
}

void add_exit_handlers(const Image& image, const HeapModel& heap, const Module& libc, const SymbolIndex& symbols, std::uint64_t guard,
                       LibcFinalizers& out) {
  std::optional<Address> head = exit_list_by_symbol(image, libc, symbols);
  if (!head) {
    const auto ranges = writable_ranges(libc, symbols);
    std::optional<Address> initial;
    for (const auto& [start, end] : ranges)
      if (!initial) initial = find_initial_exit_list(image, start, end, guard);
    if (!initial) {
      out.warnings.push_back("libc has no symbols and no exit handler list was found by signature scan: exit "
                             "handlers are not finalizer roots");
      return;
    }
    head = exit_list_head(image, heap, ranges, *initial, guard);
    out.notes.push_back("libc has no symbols: exit handler list found by signature scan");
  }
  std::unordered_set<Address> seen;
  for (Address list = *head; list != 0 && seen.insert(list).second && seen.size() < kMaxChain;) {
    const auto l = read_exit_function_list(image, list, guard);
    if (!l) {
      out.warnings.push_back(fmt::format("the exit handler list at 0x{:x} is damaged; its handlers and those "
                                         "after it are not finalizer roots", list));
      return;
    }
    for (FinalizerRegistration reg : l->registrations) {
      name_function(symbols, reg);
      out.registrations.push_back(std::move(reg));
    }
    list = l->next;
  }
}

// ---- thread_local destructors ----

struct DtorNode {
  Address function = 0, object = 0, map = 0, next = 0;
};

std::optional<DtorNode> read_dtor_node(const Image& image, Address node, std::uint64_t guard) {
  std::uint64_t w[kDtorNodeWords];
  if (!image.read_exact(node, w, sizeof w)) return std::nullopt;
  const DtorNode n{demangle_pointer(w[0], guard), w[1], w[2], w[3]};
  if (!is_code(image, n.function)) return std::nullopt;
  return n;
}

// Without libc's symbols: a node is a heap block of its own whose map is a module's link_map.
bool plausible_dtor_node(const Image& image, const HeapModel& heap, const std::unordered_set<Address>& link_maps,
                         Address node, std::uint64_t guard) {
  const Block* b = heap.block_containing(node);
  if (!b || !is_allocated(b->state) || b->address() != node || b->usable_size() < kDtorNodeWords * 8) return false;
  const auto n = read_dtor_node(image, node, guard);
  return n && link_maps.contains(n->map);
}

std::unordered_set<Address> link_map_nodes(const Image& image) {
  std::unordered_set<Address> out;
  for (const LinkMapEntry& e : read_link_map(memory_reader_for(image), image.auxv(), nullptr).entries)
    out.insert(e.node);
  return out;
}

// Where the thread's `tls_dtor_list` variable sits: by libc's TLS symbol, else the one word of libc's
// static TLS block pointing to a plausible node (nothing when the list is empty or the word is ambiguous).
std::optional<Address> dtor_list_variable(const Image& image, const HeapModel& heap, const SymbolIndex& symbols,
                                          const StaticTlsBlock& libc_tls, Address tp, std::uint64_t guard,
                                          const std::unordered_set<Address>& link_maps) {
  const ModuleSymbols* syms = symbols.symbols_for(*libc_tls.module);
  const Address block = tp + static_cast<Address>(libc_tls.start);
  if (const Symbol* s = syms ? syms->find("tls_dtor_list") : nullptr; s && s->kind == SymbolKind::tls)
    return block + s->value;
  std::vector<Address> hits;
  for_each_word(image, block, block + libc_tls.size, [&](Address at, std::uint64_t word) {
    if (word && plausible_dtor_node(image, heap, link_maps, word, guard)) hits.push_back(at);
  });
  if (hits.size() != 1) return std::nullopt;
  return hits.front();
}

// What a dtor_list node holds alive: the thread_local variable its object is (sized by the TLS symbol
// covering it), or else the node's obj word (which points at the object when that is a heap block).
void set_tls_object_slot(const Image& image, const SymbolIndex& symbols, const std::vector<StaticTlsBlock>& blocks,
                         Address tp, Address node, FinalizerRegistration& reg) {
  const std::int64_t rel = static_cast<std::int64_t>(reg.object - tp);
  for (const StaticTlsBlock& b : blocks) {
    if (rel < b.start || rel >= b.start + static_cast<std::int64_t>(b.size)) continue;
    if (const Symbol* s = tls_symbol_covering(symbols, b, static_cast<std::uint64_t>(rel - b.start))) {
      reg.slot_start = tp + static_cast<Address>(b.start) + s->value;
      reg.slot_end = reg.slot_start + std::max<std::uint64_t>(s->size, 8);
      reg.variable = static_tls_variable(image, symbols, tp, reg.slot_start);
      return;
    }
  }
  reg.slot_start = node + 8;
  reg.slot_end = node + 16;
}

void add_tls_destructors(const Image& image, const HeapModel& heap, const Module& libc, const SymbolIndex& symbols,
                         std::uint64_t guard, LibcFinalizers& out) {
  const std::vector<StaticTlsBlock> blocks = static_tls_blocks(image, symbols);
  const auto libc_tls = std::find_if(blocks.begin(), blocks.end(), [&](auto& b) { return b.module == &libc; });
  if (libc_tls == blocks.end()) {
    out.warnings.push_back("libc's static TLS block is not known: thread_local destructors are not finalizer roots");
    return;
  }
  const ModuleSymbols* syms = symbols.symbols_for(libc);
  if (!syms || !syms->find("tls_dtor_list"))
    out.notes.push_back("libc has no symbols: thread_local destructor lists found by a scan of libc's static TLS");
  const std::unordered_set<Address> link_maps = link_map_nodes(image);
  const auto& threads = image.threads();
  for (std::uint32_t i = 0; i < threads.size(); ++i) {
    const Address tp = threads[i].fs_base();
    const auto variable = tp ? dtor_list_variable(image, heap, symbols, *libc_tls, tp, guard, link_maps) : std::nullopt;
    std::unordered_set<Address> seen;
    for (auto node = variable ? image.read_u64(*variable) : std::nullopt;
         node && *node && seen.insert(*node).second && seen.size() < kMaxChain;) {
      const auto n = read_dtor_node(image, *node, guard);
      if (!n) {
        out.warnings.push_back(fmt::format("the thread_local destructor list of thread {} is damaged at 0x{:x}",
                                           i + 1, *node));
        break;
      }
      FinalizerRegistration reg;
      reg.kind = FinalizerKind::tls_dtor;
      reg.function = n->function;
      reg.object = n->object;
      reg.thread = i;
      set_tls_object_slot(image, symbols, blocks, tp, *node, reg);
      name_function(symbols, reg);
      out.registrations.push_back(std::move(reg));
      node = n->next;
    }
  }
}

// ---- pthread keys ----

// Where libc keeps keys and each thread's key data, all from `_thread_db_*` descriptors.
struct KeyLayout {
  Address keys = 0;
  std::uint32_t key_count = 0, key_size = 0, key_seq = 0, key_destr = 0;
  std::uint32_t data_size = 0, data_seq = 0, data_data = 0;
  std::uint32_t specific = 0, level2_count = 0;  // struct pthread's specific[]; entries per second-level array
};

std::optional<KeyLayout> key_layout(const Image& image, const Module& libc, const SymbolIndex& symbols) {
  const auto keys = symbols.address_of(libc, "__pthread_keys");
  const auto keys_array = thread_db_descriptor(image, symbols, libc, "_thread_db___pthread_keys");
  const auto key_size = thread_db_sizeof(image, symbols, libc, "_thread_db_sizeof_pthread_key_struct");
  const auto key_seq = thread_db_descriptor(image, symbols, libc, "_thread_db_pthread_key_struct_seq");
  const auto key_destr = thread_db_descriptor(image, symbols, libc, "_thread_db_pthread_key_struct_destr");
  const auto data_size = thread_db_sizeof(image, symbols, libc, "_thread_db_sizeof_pthread_key_data");
  const auto data_seq = thread_db_descriptor(image, symbols, libc, "_thread_db_pthread_key_data_seq");
  const auto data_data = thread_db_descriptor(image, symbols, libc, "_thread_db_pthread_key_data_data");
  const auto specific = thread_db_descriptor(image, symbols, libc, "_thread_db_pthread_specific");
  const auto level2 = thread_db_descriptor(image, symbols, libc, "_thread_db_pthread_key_data_level2_data");
  if (!keys || !keys_array || !key_size || !key_seq || !key_destr || !data_size || !data_seq || !data_data ||
      !specific || !level2 || level2->count == 0)
    return std::nullopt;
  return KeyLayout{*keys,          keys_array->count, *key_size,         key_seq->offset, key_destr->offset,
                   *data_size,     data_seq->offset,  data_data->offset, specific->offset, level2->count};
}

// Descriptors (struct pthread) whose key data may still be read: live threads' (at their thread
// pointer) and those of exited threads glibc keeps.
std::vector<std::pair<Address, std::uint32_t>> key_holders(const Image& image, const LibcThreads& glibc) {
  std::vector<std::pair<Address, std::uint32_t>> out;
  std::unordered_set<Address> live;
  const auto& threads = image.threads();
  for (std::uint32_t i = 0; i < threads.size(); ++i)
    if (threads[i].fs_base() && live.insert(threads[i].fs_base()).second) out.emplace_back(threads[i].fs_base(), i);
  for (const LibcThread& t : glibc.threads)
    if (t.exited() && !live.contains(t.descriptor)) out.emplace_back(t.descriptor, FinalizerRegistration::kNoThread);
  return out;
}

void add_key_data(const Image& image, const KeyLayout& l, std::uint32_t key, std::uint64_t seq, Address destr,
                  const std::vector<std::pair<Address, std::uint32_t>>& holders, LibcFinalizers& out) {
  for (const auto& [descriptor, thread] : holders) {
    const auto level1 = image.read_u64(descriptor + l.specific + (key / l.level2_count) * 8);
    if (!level1 || *level1 == 0) continue;  // no data for keys of this range yet
    const Address entry = *level1 + (key % l.level2_count) * l.data_size;
    const auto data_seq = image.read_u64(entry + l.data_seq);
    const auto data = image.read_u64(entry + l.data_data);
    if (!data_seq || *data_seq != seq || !data || *data == 0) continue;  // stale data of a deleted key, or none
    FinalizerRegistration reg;
    reg.kind = FinalizerKind::pthread_key;
    reg.function = destr;
    reg.object = *data;
    reg.slot_start = entry + l.data_data;
    reg.slot_end = reg.slot_start + 8;
    reg.thread = thread;
    reg.exited_thread = thread == FinalizerRegistration::kNoThread ? descriptor : 0;
    reg.key = key;
    out.registrations.push_back(std::move(reg));
  }
}

void add_pthread_keys(const Image& image, const Module& libc, const SymbolIndex& symbols, const LibcThreads& glibc,
                      LibcFinalizers& out) {
  const auto layout = key_layout(image, libc, symbols);
  if (!layout) {
    out.warnings.push_back("libc exports no __pthread_keys or _thread_db_* key descriptors: pthread key data is not "
                           "a finalizer root");
    return;
  }
  const auto holders = key_holders(image, glibc);
  const std::size_t first = out.registrations.size();
  for (std::uint32_t key = 0; key < layout->key_count; ++key) {
    const Address at = layout->keys + std::uint64_t{key} * layout->key_size;
    const auto seq = image.read_u64(at + layout->key_seq);
    const auto destr = image.read_u64(at + layout->key_destr);
    // An odd sequence number marks a key in use (nptl/pthread_key_create.c).
    if (!seq || !destr || (*seq & 1) == 0 || *destr == 0) continue;
    add_key_data(image, *layout, key, *seq, *destr, holders, out);
  }
  for (std::size_t i = first; i < out.registrations.size(); ++i) name_function(symbols, out.registrations[i]);
}

}  // namespace

std::uint64_t mangle_pointer(std::uint64_t pointer, std::uint64_t guard) { return std::rotl(pointer ^ guard, 0x11); }

std::uint64_t demangle_pointer(std::uint64_t mangled, std::uint64_t guard) { return std::rotr(mangled, 0x11) ^ guard; }

std::optional<ExitFunctionList> read_exit_function_list(const Image& image, Address list, std::uint64_t guard) {
  std::uint64_t w[kExitListWords];
  if (!image.read_exact(list, w, sizeof w) || w[1] > kExitFunctionsPerList) return std::nullopt;
  ExitFunctionList out;
  out.next = w[0];
  for (std::uint64_t i = 0; i < w[1]; ++i) {
    const std::uint64_t* e = w + 2 + i * kExitEntryWords;
    if (e[0] > ef_cxa) return std::nullopt;
    if (e[0] < ef_on) continue;  // free, or taken but not filled in yet
    FinalizerRegistration reg;
    reg.function = demangle_pointer(e[1], guard);
    if (!is_code(image, reg.function)) return std::nullopt;
    // glibc 2.36's atexit() is __cxa_atexit(fn, NULL, __dso_handle): a cxa entry without an argument.
    reg.kind = e[0] == ef_on ? FinalizerKind::on_exit
               : e[0] == ef_cxa && e[2] != 0 ? FinalizerKind::cxa_atexit
                                              : FinalizerKind::atexit;
    if (e[0] != ef_at && e[2] != 0) {
      reg.object = e[2];
      reg.slot_start = list + (2 + i * kExitEntryWords + 2) * 8;
      reg.slot_end = reg.slot_start + 8;
    }
    out.registrations.push_back(std::move(reg));
  }
  return out;
}

std::optional<Address> find_initial_exit_list(const Image& image, Address start, Address end, std::uint64_t guard) {
  std::vector<Address> hits;
  for (Address a = (start + 7) & ~Address{7}; a + kExitListWords * 8 <= end; a += 8) {
    std::uint64_t head[3];
    // Cheap test first: next null, 1..32 entries, a valid first flavor.
    if (!image.read_exact(a, head, sizeof head) || head[0] != 0 || head[1] == 0 || head[1] > kExitFunctionsPerList ||
        head[2] > ef_cxa)
      continue;
    const auto list = read_exit_function_list(image, a, guard);
    if (list && !list->registrations.empty()) hits.push_back(a);
  }
  if (hits.size() != 1) return std::nullopt;
  return hits.front();
}

LibcFinalizers find_glibc_finalizers(const Image& image, const HeapModel& heap, const SymbolIndex& symbols,
                                      const LibcThreads& threads) {
  LibcFinalizers out;
  const Module* libc = symbols.find_module("libc.so");
  if (!libc) return out;  // static executable or not glibc: no registrations to read
  if (const auto guard = pointer_guard(image)) {
    add_exit_handlers(image, heap, *libc, symbols, *guard, out);
    add_tls_destructors(image, heap, *libc, symbols, *guard, out);
  } else {
    out.warnings.push_back("no thread pointer to read glibc's pointer guard from: exit handlers and thread_local "
                           "destructors are not finalizer roots");
  }
  add_pthread_keys(image, *libc, symbols, threads, out);
  return out;
}

}  // namespace heapscope
