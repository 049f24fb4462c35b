// Coroutine clone names: GCC names its resume and destroy functions after the frame type "<ramp>.Frame",
// which the ramp's mangled name must be recovered from (mangled names as GCC 12 emits them).
#include <catch2/catch.hpp>

#include "types/coroutine_frames.h"

using heapscope::gcc_coroutine_ramp;

TEST_CASE("gcc_coroutine_ramp recovers the ramp from a GCC frame clone", "[coroutines]") {
  CHECK(gcc_coroutine_ramp("_Z4loopPZ4loopiE14_Z4loopi.Frame.destroy", ".destroy") == "_Z4loopi");
  CHECK(gcc_coroutine_ramp("_Z4loopPZ4loopiE14_Z4loopi.Frame.actor", ".actor") == "_Z4loopi");
  CHECK(gcc_coroutine_ramp("_ZN12_GLOBAL__N_115process_recordsEPZNS_15process_recordsEiE42_ZN12_GLOBAL__N_115process_"
                           "recordsEi.Frame.destroy",
                           ".destroy") == "_ZN12_GLOBAL__N_115process_recordsEi");
}

TEST_CASE("gcc_coroutine_ramp rejects other names", "[coroutines]") {
  CHECK(gcc_coroutine_ramp("_Z4loopPZ4loopiE14_Z4loopi.Frame.actor", ".destroy").empty());  // other clone
  CHECK(gcc_coroutine_ramp("_ZNSt7__n486116coroutine_handleIvE7destroyEv", ".destroy").empty());
  CHECK(gcc_coroutine_ramp("_Z4loopi.destroy", ".destroy").empty());  // Clang's spelling
  CHECK(gcc_coroutine_ramp("_Z4loopPZ4loopiE99_Z4loopi.Frame.destroy", ".destroy").empty());  // length mismatch
  CHECK(gcc_coroutine_ramp(".Frame.destroy", ".destroy").empty());
}
