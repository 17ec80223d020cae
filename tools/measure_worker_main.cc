// kiln-measure-worker: measures one tuning candidate in its own process, so
// that a kernel that crashes or hangs takes only this process down. Started by
// tuner::measure_batch; see src/tuner/measure_worker.h for the protocol.
#include "tuner/measure_worker.h"

// In a sanitizer build (scripts/test.sh --sanitize), a candidate kernel that
// crashes must still die by its signal: that is the measurement's result
// (crash, with the signal), not a finding in kiln. AddressSanitizer would
// otherwise catch SIGSEGV/SIGBUS/SIGFPE and exit with status 1. Read only
// when the program is built with AddressSanitizer.
extern "C" const char* __asan_default_options() {
  return "handle_segv=0:handle_sigbus=0:handle_sigfpe=0:handle_abort=0";
}

int main(int argc, char** argv) { return kiln::tuner::measure_worker_main(argc, argv); }
