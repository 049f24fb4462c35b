// Where each module's static TLS block lies relative to the thread pointer, and which TLS variable covers
// a word of it. Shared by the root labels (model/roots.cpp) and the finalizer roots that live in TLS
// (runtime/glibc/glibc_finalizers.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "image/image.h"
#include "symbols/symbol_index.h"

namespace heapscope {

// A module's static TLS block (x86-64: below the thread pointer, so `start` is negative).
struct StaticTlsBlock {
  const Module* module = nullptr;
  std::int64_t start = 0;  // tp-relative
  std::uint64_t size = 0;
};

std::vector<StaticTlsBlock> static_tls_blocks(const Image& image, const SymbolIndex& symbols);

// The TLS symbol of `block`'s module covering the block-relative `offset`; null when none does.
const Symbol* tls_symbol_covering(const SymbolIndex& symbols, const StaticTlsBlock& block, std::uint64_t offset);

// "g_cache+0x8 in app" for a word of the static TLS of the thread whose pointer is `tp`, "TLS block of
// app +0x10" when no symbol covers it, empty when no module's block does.
std::string static_tls_variable(const Image& image, const SymbolIndex& symbols, Address tp, Address word);

// Where the static TLS of a pthread whose thread pointer `tp` lies in its stack mapping (from
// `mapping_start`) begins: glibc places the TLS blocks right below the descriptor at the top of the
// mapping. The DTV (tcbhead_t.dtv at tp+8, its length at dtv[-1], entries {val, to_free}) gives where each
// module's static TLS block starts (to_free is null for those): the lowest such start inside the mapping
// is where TLS begins; without one, the descriptor at the thread pointer is.
Address static_tls_start(const Image& image, Address tp, Address mapping_start);

}  // namespace heapscope
