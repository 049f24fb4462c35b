#include "runtime/libc_runtime.h"

namespace heapscope {

const char* finalizer_kind_name(FinalizerKind kind) {
  switch (kind) {
    case FinalizerKind::atexit: return "atexit";
    case FinalizerKind::on_exit: return "on_exit";
    case FinalizerKind::cxa_atexit: return "cxa_atexit";
    case FinalizerKind::tls_dtor: return "tls_dtor";
    case FinalizerKind::pthread_key: return "pthread_key";
    case FinalizerKind::gc_finalizer: return "gc_finalizer";
  }
  return "?";
}

}  // namespace heapscope
