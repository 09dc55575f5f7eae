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
// A thread that a compute thread starts (gRPC may start one from the step
// loop's completion callbacks) inherits the compute CPUs: ThreadPinner puts
// such threads back every second.
//
// Threads: call PinComputeThreads from the main thread, once the engine is
// loaded; ThreadPinner's methods from one thread.
#ifndef LLM_MODEL_SVC_SERVER_COMPUTE_AFFINITY_H_
#define LLM_MODEL_SVC_SERVER_COMPUTE_AFFINITY_H_

#include <sched.h>

#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"

namespace llm {

struct ComputeAffinity {
  std::vector<int> compute_cpus;  // the compute threads'
  std::vector<int> other_cpus;    // every other thread's
  int compute_threads = 0;        // threads on compute_cpus
};

// OK when 1 <= compute_cpus and the process may run on more than
// `compute_cpus` CPUs (one at least is left for the other threads);
// FAILED_PRECONDITION otherwise. Cheap: call it before loading the model.
absl::Status CheckPinnable(int compute_cpus);

// Pins the threads as above. Waits up to two seconds for
// `compute_threads` compute threads to have named themselves.
// FAILED_PRECONDITION as CheckPinnable, or when fewer compute threads than
// that exist; INTERNAL if the kernel refuses.
absl::StatusOr<ComputeAffinity> PinComputeThreads(int compute_cpus, int compute_threads);

// Keeps the placement of PinComputeThreads: once a second, moves any thread
// that is on the wrong side (a thread a compute thread started) back.
class ThreadPinner {
 public:
  explicit ThreadPinner(const ComputeAffinity& affinity);
  ThreadPinner(const ThreadPinner&) = delete;
  ThreadPinner& operator=(const ThreadPinner&) = delete;
  ~ThreadPinner();  // stops it

 private:
  void Loop();

  cpu_set_t compute_, other_;
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace llm

#endif  // LLM_MODEL_SVC_SERVER_COMPUTE_AFFINITY_H_
