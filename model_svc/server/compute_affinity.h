// Cores of their own for the forward pass's threads (model_server
// --pin_threads).
//
// The engine names its compute threads: the step loop "llm-step" and the CPU
// backend's pool workers "llm-pool-N". PinComputeThreads puts them on the
// first `compute_cpus` CPUs of the process's affinity set and every other
// thread of the process on the rest: gRPC's threads, which then never
// preempt a thread of the forward pass (a preempted thread holds its share of
// a parallel loop, and the others wait), and the caller, so that threads it
// starts later land on the rest too (a thread inherits its creator's set).
//
// Threads: call from the main thread, once the engine is loaded.
#ifndef LLM_MODEL_SVC_SERVER_COMPUTE_AFFINITY_H_
#define LLM_MODEL_SVC_SERVER_COMPUTE_AFFINITY_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace llm {

struct ComputeAffinity {
  std::vector<int> compute_cpus;  // the compute threads'
  std::vector<int> other_cpus;    // every other thread's
  int compute_threads = 0;        // threads pinned to compute_cpus
};

// OK when the process may run on more than `compute_cpus` CPUs (there must be
// one left for the other threads); FAILED_PRECONDITION otherwise. Cheap: call
// it before loading the model, to fail early.
absl::Status CheckPinnable(int compute_cpus);

// Pins the threads as above. Waits up to two seconds for `expected` compute
// threads to have named themselves. FAILED_PRECONDITION as CheckPinnable, or
// when no compute thread is found; INTERNAL if the kernel refuses.
absl::StatusOr<ComputeAffinity> PinComputeThreads(int compute_cpus, int expected);

}  // namespace llm

#endif  // LLM_MODEL_SVC_SERVER_COMPUTE_AFFINITY_H_
