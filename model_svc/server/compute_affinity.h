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
// starts on its creator's CPUs).
//
// Except: gRPC may start a thread of its own (its default-executor's) from
// a call that the step loop's completion callbacks make (about once in 20
// runs of model_service_test's pin test), and no hook places it. The step
// loop runs its callbacks with every CPU allowed (LoadOptions::
// callback_cpus: all_cpus), so such a thread is not confined to the compute
// CPUs, though the scheduler may still run it there. (Moving the step loop
// to the other CPUs for its callbacks placed such threads exactly, but cost
// 8-13% of end-to-end decode with one compute thread on 2 cores: the loop
// queued behind the RPC threads there. The periodic re-pinning of threads
// found by name that this replaces moved them within a second.)
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
  std::vector<int> all_cpus;      // both
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
