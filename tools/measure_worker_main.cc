// kiln-measure-worker: measures one tuning candidate in its own process, so
// that a kernel that crashes or hangs takes only this process down. Started by
// tuner::measure_batch; see src/tuner/measure_worker.h for the protocol.
#include "tuner/measure_worker.h"

int main(int argc, char** argv) { return kiln::tuner::measure_worker_main(argc, argv); }
