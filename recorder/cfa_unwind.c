/* recorder/cfa_unwind.h says what this is for. The rules come from the DWARF call frame information in each
 * module's .eh_frame, found through .eh_frame_hdr's sorted table (glibc's _dl_find_object names the module
 * and its .eh_frame_hdr without a lock or an allocation). Of a frame's CFI only three things are kept:
 * how the CFA is computed (%rsp or %rbp plus an offset), where %rbp was saved, and whether the return
 * address is undefined (the outermost frame: _start, clone). The return address is always at CFA - 8 on
 * x86-64; a CIE that says otherwise is declined. */
#define _GNU_SOURCE
#include "cfa_unwind.h"

#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

enum { kRbp = 6, kRsp = 7, kReturnAddress = 16 };

/* ---- a frame's rule, packed in 64 bits so that a cache slot holds it beside its key ---- */

enum {
  kKnown = 1u << 0,
  kCfaFromRbp = 1u << 1,
  kOutermost = 1u << 2,
  kDeclined = 1u << 3,
  kRbpSaved = 1u << 4,
};

static uint64_t make_rule(unsigned flags, int32_t cfa_offset, int16_t rbp_offset) {
  return (uint64_t)(flags | kKnown) | ((uint64_t)(uint16_t)rbp_offset << 16) | ((uint64_t)(uint32_t)cfa_offset << 32);
}
static const uint64_t kDeclinedRule = kKnown | kDeclined;
static int32_t rule_cfa_offset(uint64_t rule) { return (int32_t)(uint32_t)(rule >> 32); }
static int16_t rule_rbp_offset(uint64_t rule) { return (int16_t)(uint16_t)(rule >> 16); }

/* ---- reading .eh_frame's encodings ---- */

struct reader {
  const uint8_t* at;
  const uint8_t* end;
  int failed;
};

static uint8_t read_u8(struct reader* r) {
  if (r->at >= r->end) { r->failed = 1; return 0; }
  return *r->at++;
}

static uint64_t read_fixed(struct reader* r, unsigned bytes) {
  if (r->end - r->at < (long)bytes) { r->failed = 1; return 0; }
  uint64_t value = 0;
  memcpy(&value, r->at, bytes);  /* little-endian */
  r->at += bytes;
  return value;
}

static uint64_t read_uleb(struct reader* r) {
  uint64_t value = 0;
  for (unsigned shift = 0;; shift += 7) {
    const uint8_t byte = read_u8(r);
    if (shift < 64) value |= (uint64_t)(byte & 0x7f) << shift;
    if (!(byte & 0x80) || r->failed) return value;
  }
}

static int64_t read_sleb(struct reader* r) {
  uint64_t value = 0;
  unsigned shift = 0;
  uint8_t byte;
  do {
    byte = read_u8(r);
    if (shift < 64) value |= (uint64_t)(byte & 0x7f) << shift;
    shift += 7;
  } while ((byte & 0x80) && !r->failed);
  if (shift < 64 && (byte & 0x40)) value |= ~(uint64_t)0 << shift;
  return (int64_t)value;
}

enum {
  kPeOmit = 0xff, kPeAbsptr = 0x00, kPeUleb = 0x01, kPeUdata2 = 0x02, kPeUdata4 = 0x03, kPeUdata8 = 0x04,
  kPeSleb = 0x09, kPeSdata2 = 0x0a, kPeSdata4 = 0x0b, kPeSdata8 = 0x0c,
  kPePcrel = 0x10, kPeDatarel = 0x30, kPeIndirect = 0x80,
};

/* A pointer in `encoding` (DW_EH_PE_*): relative to where it is read (pcrel) or to `data_base` (datarel).
 * An indirect pointer is not followed (the recorder never needs one's value: only a personality is). */
static uint64_t read_encoded(struct reader* r, uint8_t encoding, uint64_t data_base) {
  const uint64_t here = (uint64_t)(uintptr_t)r->at;
  uint64_t value;
  switch (encoding & 0x0f) {
    case kPeAbsptr: case kPeUdata8: case kPeSdata8: value = read_fixed(r, 8); break;
    case kPeUleb: value = read_uleb(r); break;
    case kPeSleb: value = (uint64_t)read_sleb(r); break;
    case kPeUdata2: value = read_fixed(r, 2); break;
    case kPeSdata2: value = (uint64_t)(int64_t)(int16_t)read_fixed(r, 2); break;
    case kPeUdata4: value = read_fixed(r, 4); break;
    case kPeSdata4: value = (uint64_t)(int64_t)(int32_t)read_fixed(r, 4); break;
    default: r->failed = 1; return 0;
  }
  switch (encoding & 0x70) {
    case 0: break;
    case kPePcrel: value += here; break;
    case kPeDatarel: value += data_base; break;
    default: r->failed = 1; return 0;
  }
  return value;
}

/* ---- the CIE and FDE that cover an address ---- */

struct cie {
  uint64_t code_align;
  int64_t data_align;
  uint8_t fde_encoding;
  int has_augmentation_data;
  const uint8_t* instructions;
  const uint8_t* end;
};

static int read_cie(const uint8_t* at, struct cie* cie) {
  struct reader r = {at, at + 8, 0};
  const uint32_t length = (uint32_t)read_fixed(&r, 4);
  if (length == 0 || length == 0xffffffffu || read_fixed(&r, 4) != 0) return 0;  /* no 64-bit DWARF; a CIE's id is 0 */
  r.end = at + 4 + length;
  const uint8_t version = read_u8(&r);
  if (version != 1 && version != 3 && version != 4) return 0;
  const char* augmentation = (const char*)r.at;
  const size_t augmentation_length = strnlen(augmentation, (size_t)(r.end - r.at));
  r.at += augmentation_length + 1;
  if (version == 4) r.at += 2;  /* address and segment selector sizes */
  cie->code_align = read_uleb(&r);
  cie->data_align = read_sleb(&r);
  const uint64_t return_column = version == 1 ? read_u8(&r) : read_uleb(&r);
  if (return_column != kReturnAddress) return 0;
  cie->fde_encoding = kPeAbsptr;
  cie->has_augmentation_data = augmentation[0] == 'z';
  if (cie->has_augmentation_data) {
    const uint64_t data_length = read_uleb(&r);
    struct reader data = {r.at, r.at + data_length, 0};
    if (data.end > r.end) return 0;
    for (const char* c = augmentation + 1; *c; ++c) {
      if (*c == 'R') {
        cie->fde_encoding = read_u8(&data);
      } else if (*c == 'P') {
        const uint8_t encoding = read_u8(&data);
        read_encoded(&data, (uint8_t)(encoding & ~kPeIndirect), 0);  /* the personality: skipped */
      } else if (*c == 'L') {
        read_u8(&data);
      } else {
        return 0;  /* 'S' (a signal frame) and anything unknown: declined */
      }
    }
    if (data.failed) return 0;
    r.at = data.end;
  } else if (augmentation[0] != '\0') {
    return 0;
  }
  cie->instructions = r.at;
  cie->end = r.end;
  return !r.failed;
}

/* The FDE covering `pc` in the module whose .eh_frame_hdr is `header`, found in its sorted table; its CIE
 * in `cie`, its instructions in [*instructions, *end), its first address in *start. */
static int find_fde(const uint8_t* header, uint64_t pc, struct cie* cie, const uint8_t** instructions,
                    const uint8_t** end, uint64_t* start) {
  const uint64_t base = (uint64_t)(uintptr_t)header;
  struct reader r = {header, header + 4, 0};
  if (read_u8(&r) != 1) return 0;
  const uint8_t frame_pointer_encoding = read_u8(&r);
  const uint8_t count_encoding = read_u8(&r);
  const uint8_t table_encoding = read_u8(&r);
  /* Every linker writes the table as pairs of 4-byte offsets from the header, sorted by address. */
  if (table_encoding != (kPeDatarel | kPeSdata4) || count_encoding == kPeOmit) return 0;
  r.end = header + 4 + 16;
  read_encoded(&r, frame_pointer_encoding, base);
  const uint64_t count = read_encoded(&r, count_encoding, base);
  if (r.failed || count == 0) return 0;
  const int32_t* table = (const int32_t*)(const void*)r.at;
  uint64_t low = 0, high = count;  /* the last entry whose address is <= pc */
  while (high - low > 1) {
    const uint64_t middle = low + (high - low) / 2;
    if (base + (uint64_t)(int64_t)table[2 * middle] <= pc) low = middle;
    else high = middle;
  }
  if (base + (uint64_t)(int64_t)table[2 * low] > pc) return 0;
  const uint8_t* fde = header + table[2 * low + 1];
  struct reader f = {fde, fde + 8, 0};
  const uint32_t length = (uint32_t)read_fixed(&f, 4);
  if (length == 0 || length == 0xffffffffu) return 0;
  const uint8_t* cie_field = f.at;
  const uint32_t cie_offset = (uint32_t)read_fixed(&f, 4);
  if (cie_offset == 0 || !read_cie(cie_field - cie_offset, cie)) return 0;
  f.end = fde + 4 + length;
  *start = read_encoded(&f, cie->fde_encoding, base);
  const uint64_t range = read_encoded(&f, (uint8_t)(cie->fde_encoding & 0x0f), base);
  if (f.failed || pc < *start || pc - *start >= range) return 0;
  if (cie->has_augmentation_data) f.at += read_uleb(&f);
  if (f.failed || f.at > f.end) return 0;
  *instructions = f.at;
  *end = f.end;
  return 1;
}

/* ---- running the CFA program up to an address ---- */

struct cfa_state {
  uint64_t cfa_register;
  int64_t cfa_offset;
  int64_t rbp_offset;
  int rbp_saved;
  int return_address_undefined;
  /* Rules this walker does not follow (an expression, a copy in another register, the return address
   * anywhere but CFA - 8): declined if still in force at the address. */
  int cfa_is_expression;
  int rbp_unfollowable;
  int return_address_unfollowable;
};

enum { kMaxRememberedStates = 8 };

struct cfa_program {
  struct cfa_state state;
  struct cfa_state initial;  /* after the CIE's instructions: what DW_CFA_restore returns to */
  struct cfa_state remembered[kMaxRememberedStates];
  int remembered_count;
};

static void set_register_offset(struct cfa_state* s, uint64_t reg, int64_t offset) {
  if (reg == kRbp) {
    s->rbp_saved = 1;
    s->rbp_offset = offset;
    s->rbp_unfollowable = 0;
  } else if (reg == kReturnAddress) {
    s->return_address_unfollowable = offset != -8;
  }
}

static void set_register_unfollowable(struct cfa_state* s, uint64_t reg) {
  if (reg == kRbp) s->rbp_unfollowable = 1;
  if (reg == kReturnAddress) s->return_address_unfollowable = 1;
}

static void restore_rbp(struct cfa_program* p) {
  p->state.rbp_saved = p->initial.rbp_saved;
  p->state.rbp_offset = p->initial.rbp_offset;
  p->state.rbp_unfollowable = p->initial.rbp_unfollowable;
}

/* Runs the instructions in `r` from address `location` while it is <= pc. 0 when they cannot be read. */
static int run_cfa_program(struct cfa_program* p, struct reader* r, const struct cie* cie, uint64_t location,
                           uint64_t pc) {
  struct cfa_state* s = &p->state;
  while (r->at < r->end && !r->failed) {
    const uint8_t op = read_u8(r);
    uint64_t advance, reg;
    if (op >> 6 == 1) {                                      /* advance_loc */
      advance = op & 0x3f;
    } else if (op >> 6 == 2) {                               /* offset */
      set_register_offset(s, op & 0x3f, (int64_t)read_uleb(r) * cie->data_align);
      continue;
    } else if (op >> 6 == 3) {                               /* restore */
      if ((op & 0x3f) == kRbp) restore_rbp(p);
      continue;
    } else switch (op) {
      case 0x00: continue;                                   /* nop */
      case 0x02: advance = read_fixed(r, 1); break;          /* advance_loc1 */
      case 0x03: advance = read_fixed(r, 2); break;          /* advance_loc2 */
      case 0x04: advance = read_fixed(r, 4); break;          /* advance_loc4 */
      case 0x05: reg = read_uleb(r); set_register_offset(s, reg, (int64_t)read_uleb(r) * cie->data_align); continue;
      case 0x06:                                             /* restore_extended */
        if (read_uleb(r) == kRbp) restore_rbp(p);
        continue;
      case 0x07:                                             /* undefined */
        reg = read_uleb(r);
        if (reg == kReturnAddress) s->return_address_undefined = 1;
        if (reg == kRbp) s->rbp_saved = s->rbp_unfollowable = 0;
        continue;
      case 0x08: if (read_uleb(r) == kRbp) s->rbp_saved = s->rbp_unfollowable = 0; continue;  /* same_value */
      case 0x09: reg = read_uleb(r); read_uleb(r); set_register_unfollowable(s, reg); continue;  /* register */
      case 0x0a:                                             /* remember_state */
        if (p->remembered_count == kMaxRememberedStates) return 0;
        p->remembered[p->remembered_count++] = *s;
        continue;
      case 0x0b:                                             /* restore_state */
        if (p->remembered_count == 0) return 0;
        *s = p->remembered[--p->remembered_count];
        continue;
      case 0x0c: s->cfa_register = read_uleb(r); s->cfa_offset = (int64_t)read_uleb(r); s->cfa_is_expression = 0; continue;
      case 0x0d: s->cfa_register = read_uleb(r); s->cfa_is_expression = 0; continue;
      case 0x0e: s->cfa_offset = (int64_t)read_uleb(r); continue;
      case 0x0f: r->at += read_uleb(r); s->cfa_is_expression = 1; continue;  /* def_cfa_expression */
      case 0x10: case 0x16:                                  /* expression, val_expression */
        reg = read_uleb(r);
        r->at += read_uleb(r);
        set_register_unfollowable(s, reg);
        continue;
      case 0x11: reg = read_uleb(r); set_register_offset(s, reg, read_sleb(r) * cie->data_align); continue;
      case 0x12:
        s->cfa_register = read_uleb(r);
        s->cfa_offset = read_sleb(r) * cie->data_align;
        s->cfa_is_expression = 0;
        continue;
      case 0x13: s->cfa_offset = read_sleb(r) * cie->data_align; continue;
      case 0x14: case 0x15: reg = read_uleb(r); read_uleb(r); set_register_unfollowable(s, reg); continue;
      case 0x2e: read_uleb(r); continue;                     /* GNU_args_size */
      case 0x2f: reg = read_uleb(r); set_register_offset(s, reg, -(int64_t)read_uleb(r) * cie->data_align); continue;
      default: return 0;                                     /* set_loc and anything unknown */
    }
    location += advance * cie->code_align;
    if (location > pc) return !r->failed;
  }
  return !r->failed;
}

/* The rule of the frame whose return address (or, for a signal-free walk, resume address) is `ip`. */
static uint64_t work_out_rule(uint64_t ip) {
  const uint64_t pc = ip - 1;  /* inside the call instruction: a noreturn call can end a function */
  struct dl_find_object found;
  if (_dl_find_object((void*)(uintptr_t)pc, &found) != 0 || !found.dlfo_eh_frame) return kDeclinedRule;
  struct cie cie;
  const uint8_t *instructions, *end;
  uint64_t start;
  if (!find_fde(found.dlfo_eh_frame, pc, &cie, &instructions, &end, &start)) return kDeclinedRule;
  struct cfa_program program;
  memset(&program, 0, sizeof program);
  struct reader r = {cie.instructions, cie.end, 0};
  if (!run_cfa_program(&program, &r, &cie, 0, UINT64_MAX)) return kDeclinedRule;
  program.initial = program.state;
  r = (struct reader){instructions, end, 0};
  if (!run_cfa_program(&program, &r, &cie, start, pc)) return kDeclinedRule;
  const struct cfa_state* s = &program.state;
  if (s->return_address_undefined) return make_rule(kOutermost, 0, 0);
  if (s->cfa_is_expression || s->rbp_unfollowable || s->return_address_unfollowable || (s->cfa_register != kRsp && s->cfa_register != kRbp) || s->cfa_offset < 8 ||
      s->cfa_offset > INT32_MAX || (s->rbp_saved && (s->rbp_offset < INT16_MIN || s->rbp_offset > INT16_MAX)))
    return kDeclinedRule;
  return make_rule((s->cfa_register == kRbp ? kCfaFromRbp : 0) | (s->rbp_saved ? kRbpSaved : 0),
                   (int32_t)s->cfa_offset, (int16_t)(s->rbp_saved ? s->rbp_offset : 0));
}

/* ---- the rules already worked out: direct-mapped by return address ----
 * Read without a lock under a sequence count (odd while a writer writes); written under a lock that is
 * only tried, never waited for, so that a fork child can never block on it. A module unloaded and another
 * loaded at its address would leave stale rules; the walk's bounds checks stop such a walk. */

enum { kCacheSlots = 1 << 14 };

struct cache_slot {
  uint64_t ip;
  uint64_t rule;
};

static struct cache_slot cache[kCacheSlots];
static uint64_t cache_sequence;
static pthread_mutex_t cache_writer = PTHREAD_MUTEX_INITIALIZER;

static struct cache_slot* slot_of(uint64_t ip) {
  return &cache[((ip * 0x9e3779b97f4a7c15u) >> 50) & (kCacheSlots - 1)];
}

static uint64_t cached_rule(uint64_t ip) {
  const uint64_t before = __atomic_load_n(&cache_sequence, __ATOMIC_ACQUIRE);
  const struct cache_slot* slot = slot_of(ip);
  const uint64_t key = __atomic_load_n(&slot->ip, __ATOMIC_RELAXED);
  const uint64_t rule = __atomic_load_n(&slot->rule, __ATOMIC_RELAXED);
  __atomic_thread_fence(__ATOMIC_ACQUIRE);
  if ((before & 1) || key != ip || __atomic_load_n(&cache_sequence, __ATOMIC_RELAXED) != before) return 0;
  return rule;
}

static void remember_rule(uint64_t ip, uint64_t rule) {
  if (pthread_mutex_trylock(&cache_writer) != 0) return;
  __atomic_store_n(&cache_sequence, cache_sequence + 1, __ATOMIC_RELAXED);
  __atomic_thread_fence(__ATOMIC_RELEASE);
  struct cache_slot* slot = slot_of(ip);
  __atomic_store_n(&slot->ip, ip, __ATOMIC_RELAXED);
  __atomic_store_n(&slot->rule, rule, __ATOMIC_RELAXED);
  __atomic_store_n(&cache_sequence, cache_sequence + 1, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&cache_writer);
}

/* ---- the walk ---- */

enum { kMaxFrameBytes = 64 << 20 };  /* a CFA further than this above %rsp is not a caller's frame */

int hs_cfa_backtrace(struct hs_frame frame, uint64_t* frames, int capacity) {
  int depth = 0;
  while (depth < capacity && frame.ip) {
    frames[depth++] = frame.ip;
    uint64_t rule = cached_rule(frame.ip);
    if (!rule) {
      rule = work_out_rule(frame.ip);
      remember_rule(frame.ip, rule);
    }
    if (rule & kDeclined) return -1;
    if (rule & kOutermost) break;
    const uint64_t cfa = ((rule & kCfaFromRbp) ? frame.rbp : frame.rsp) + (uint64_t)(int64_t)rule_cfa_offset(rule);
    if (cfa <= frame.rsp || cfa - frame.rsp > kMaxFrameBytes) break;
    const uint64_t rbp = (rule & kRbpSaved) ? *(const uint64_t*)(uintptr_t)(cfa + (uint64_t)(int64_t)rule_rbp_offset(rule))
                                            : frame.rbp;
    frame.ip = *(const uint64_t*)(uintptr_t)(cfa - 8);
    frame.rsp = cfa;
    frame.rbp = rbp;
  }
  return depth;
}
