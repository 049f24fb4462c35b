// Report of the `finalizers` command: every registration glibc keeps until exit or thread exit (exit
// handlers, thread_local destructors, pthread keys with a destructor), with what each one alone keeps
// alive.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "reports/retention_reports.h"

namespace heapscope {

struct FinalizerRow {
  std::string kind;             // "atexit", "on_exit", "cxa_atexit", "tls_dtor", "pthread_key"
  std::string function;         // the handler, demangled: "close_channel(void*)"
  std::string module;           // the module holding the handler; empty when none does
  Address function_address = 0;
  Address object = 0;           // what the handler receives (argument, thread_local object, key data)
  Address slot = 0;             // where the registration holds it (the root's start); 0 when it holds nothing
  std::uint32_t tid = 0;        // tls_dtor, pthread_key of a live thread: its tid; 0 otherwise
  Address exited_thread = 0;    // pthread_key of an exited thread: its pthread_t; 0 otherwise
  std::optional<std::uint32_t> key;  // pthread_key: the key
  std::string variable;         // tls_dtor: the thread_local variable, when a TLS symbol names it
  std::string label;            // the root's label; empty when the registration holds nothing
  Retained retained;            // what this registration alone keeps alive (dominator tree)
};

struct FinalizerKindTotal {
  std::string kind;
  std::uint64_t registrations = 0;
  std::uint64_t retained_bytes = 0;  // Σ of its registrations' retained bytes
};

// The registrations of one handler: "close_all(void*) × 200 retains 1.8 MiB".
struct FinalizerFunctionGroup {
  std::string function;  // as FinalizerRow::function
  std::string module;
  std::string kind;      // the registrations' kind, or "mixed"
  std::uint64_t registrations = 0;
  std::uint64_t retained_bytes = 0, retained_blocks = 0;  // Σ of what each registration alone keeps alive
};

struct FinalizersReport {
  HeapTotals heap;
  std::vector<FinalizerFunctionGroup> functions;  // by retained bytes, largest first
  // By retained bytes, largest first; at most -n of them (registrations_total says how many there are).
  std::vector<FinalizerRow> registrations;
  std::uint64_t registrations_total = 0;
  std::vector<FinalizerKindTotal> kinds;    // in the order of FinalizerKind
  // What the finalizer roots keep alive: the process-wide registrations between them, plus what each
  // registration of a live thread alone keeps (those are parts of their thread in the ownership tree).
  Retained total;
  std::vector<std::string> warnings;
};

}  // namespace heapscope
