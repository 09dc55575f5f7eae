// Thread placement on CPUs (the Linux scheduler's affinity), with CPU sets as
// lists of CPU ids in increasing order. A thread starts on the CPUs of the
// thread that starts it.
//
// Threads: any thread may call these; each reads or changes only the thread
// it names.
#ifndef LLM_COMMON_CPU_SET_H_
#define LLM_COMMON_CPU_SET_H_

#include <pthread.h>

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace llm {

// The CPUs the calling thread may run on; INTERNAL if the kernel does not say.
absl::StatusOr<std::vector<int>> ThisThreadCpus();

// Puts `thread` on `cpus`: it runs only there from now on, and the threads it
// starts later start there. INVALID_ARGUMENT for an empty set or an id
// outside [0, CPU_SETSIZE); INTERNAL when the kernel refuses (no CPU of the
// set is one the process may use).
absl::Status PinThread(pthread_t thread, const std::vector<int>& cpus);
inline absl::Status PinThisThread(const std::vector<int>& cpus) {
  return PinThread(pthread_self(), cpus);
}

}  // namespace llm

#endif  // LLM_COMMON_CPU_SET_H_
