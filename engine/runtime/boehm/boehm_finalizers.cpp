#include "runtime/boehm/boehm_finalizers.h"

#include <fmt/format.h>

#include <array>
#include <unordered_set>

#include "runtime/boehm/boehm_layout.h"
#include "runtime/boehm/boehm_runtime.h"

namespace heapscope::boehm {

namespace {

constexpr unsigned kMaxLogTableSize = 28;
constexpr std::size_t kMaxEntries = std::size_t{1} << 26;

class Reader {
 public:
  Reader(const Image& image, const SymbolIndex& symbols, std::vector<std::string>& warnings)
      : image_(image), symbols_(symbols), warnings_(warnings) {}

  std::vector<FinalizerRegistration> run(Address arrays) {
    const Address table = image_.read_u64(arrays + ArraysLayout::fo_head).value_or(0);
    const std::uint64_t log_size = image_.read_u64(arrays + ArraysLayout::log_fo_table_size).value_or(0) & 0xffffffff;
    const std::uint64_t entries = image_.read_u64(arrays + ArraysLayout::fo_entries).value_or(0);
    if (table != 0) {
      if (log_size > kMaxLogTableSize) {
        warnings_.push_back(fmt::format("Boehm GC's finalizer table claims 2^{} chains: not read", log_size));
      } else {
        for (std::uint64_t i = 0; i < (std::uint64_t{1} << log_size); ++i) {
          const WordRead head = image_.read_u64(table + i * 8);
          if (!head) {
            warnings_.push_back(fmt::format("Boehm GC's finalizer table at {:#x} is not readable", table));
            break;
          }
          follow(*head, true);
        }
      }
    }
    if (out_.size() != entries && !damaged_)
      warnings_.push_back(fmt::format("Boehm GC counts {} registered finalizers (GC_fo_entries), the table holds {}",
                                      entries, out_.size()));
    follow(image_.read_u64(arrays + ArraysLayout::finalize_now).value_or(0), false);
    return std::move(out_);
  }

 private:
  // One chain of finalizable objects: hidden (registered) or revealed (ready to run).
  void follow(Address entry, bool hidden) {
    for (std::size_t n = 0; entry != 0; ++n) {
      if (n == kMaxEntries || !seen_.insert(entry).second) {
        warn(entry, "a chain that ends");
        return;
      }
      std::array<std::uint64_t, FinalizableLayout::size / 8> fo{};
      if (image_.read(entry, fo.data(), sizeof fo) != sizeof fo) {
        warn(entry, "a readable entry");
        return;
      }
      FinalizerRegistration reg;
      reg.kind = FinalizerKind::gc_finalizer;
      reg.function = fo[FinalizableLayout::function / 8];
      reg.object = hidden ? ~fo[FinalizableLayout::hidden_object / 8] : fo[FinalizableLayout::hidden_object / 8];
      reg.slot_start = entry + FinalizableLayout::hidden_object;
      reg.slot_end = reg.slot_start + 8;
      reg.hidden_pointer = hidden;
      reg.ready_to_run = !hidden;
      const ResolvedSymbol where = symbols_.resolve(reg.function);
      reg.module = where.module ? std::string(where.module->name()) : std::string();
      reg.function_name = where.symbol && where.offset == 0 ? demangle(where.symbol->name) : symbols_.describe(reg.function);
      out_.push_back(std::move(reg));
      entry = fo[FinalizableLayout::next / 8];
    }
  }

  void warn(Address entry, const char* expected) {
    damaged_ = true;
    warnings_.push_back(fmt::format("Boehm GC's finalizer chain is damaged at {:#x} (expected {}): the rest of it is "
                                    "not read, so what it holds may show as leaked",
                                    entry, expected));
  }

  const Image& image_;
  const SymbolIndex& symbols_;
  std::vector<std::string>& warnings_;
  std::vector<FinalizerRegistration> out_;
  std::unordered_set<Address> seen_;
  bool damaged_ = false;
};

}  // namespace

std::vector<FinalizerRegistration> read_finalizers(const Image& image, const SymbolIndex& symbols,
                                                   std::vector<std::string>& warnings) {
  const Module* module = find_collector(image, symbols);
  if (!module) return {};
  std::string why_not;
  const std::optional<Runtime> rt = locate_runtime(image, symbols, *module, &why_not);
  if (!rt) return {};  // the heap's own warning says why
  return Reader(image, symbols, warnings).run(rt->arrays);
}

}  // namespace heapscope::boehm
