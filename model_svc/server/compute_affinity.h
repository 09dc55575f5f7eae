// Cores of their own for the forward pass's threads (model_server
// --pin_threads).
//
// The compute threads (the engine's step loop and the CPU backend's pool
// workers) go on the first CPUs of the process's affinity set and every
// other thread on the rest: gRPC's threads then never preempt a thread of the
// forward pass (a preempted thread holds its share of a parallel loop, and
// the others wait). Each compute thread is given its CPUs as it is made
// (LoadOptions::compute_cpus); every other thread starts on the rest because
// model_server's main thread moves there before it starts any (a thread
// starts on its creator's CPUs), and the step loop moves there to run its
// completion callbacks (LoadOptions::callback_cpus), from which gRPC may
// start a thread of its own.
//
// Threads: pure functions, but for ThisThreadCpus' read of the caller's set.
#ifndef LLM_MODEL_SVC_SERVER_COMPUTE_AFFINITY_H_
#define LLM_MODEL_SVC_SERVER_COMPUTE_AFFINITY_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace llm {

struct ComputeAffinity {
  std::vector<int> compute_cpus;  // the compute threads'
  std::vector<int> other_cpus;    // every other thread's
};

// The first `compute_cpus` of `allowed` (a thread's CPUs, in increasing
// order) for the compute threads, the rest for the others.
// FAILED_PRECONDITION unless 1 <= compute_cpus < allowed.size() (one CPU at
// least is left for the other threads).
absl::StatusOr<ComputeAffinity> SplitCpus(const std::vector<int>& allowed, int compute_cpus);

// SplitCpus over the calling thread's CPUs, for its status alone: cheap, to
// call before loading the model.
absl::Status CheckPinnable(int compute_cpus);

}  // namespace llm

#endif  // LLM_MODEL_SVC_SERVER_COMPUTE_AFFINITY_H_
