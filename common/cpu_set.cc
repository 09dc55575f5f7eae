#include "common/cpu_set.h"

#include <sched.h>

#include <cstring>

#include "common/strings.h"

namespace llm {

absl::StatusOr<std::vector<int>> ThisThreadCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (const int e = pthread_getaffinity_np(pthread_self(), sizeof(set), &set); e != 0) {
    return absl::InternalError(StrCat("pthread_getaffinity_np: ", std::strerror(e)));
  }
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

absl::Status PinThread(pthread_t thread, const std::vector<int>& cpus) {
  if (cpus.empty()) return absl::InvalidArgumentError("no CPU to pin a thread to");
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : cpus) {
    if (cpu < 0 || cpu >= CPU_SETSIZE) {
      return absl::InvalidArgumentError(
          StrCat("CPU ", cpu, " is out of range [0, ", CPU_SETSIZE, ")"));
    }
    CPU_SET(cpu, &set);
  }
  if (const int e = pthread_setaffinity_np(thread, sizeof(set), &set); e != 0) {
    return absl::InternalError(StrCat("pthread_setaffinity_np: ", std::strerror(e)));
  }
  return absl::OkStatus();
}

}  // namespace llm
