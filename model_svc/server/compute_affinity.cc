#include "model_svc/server/compute_affinity.h"

#include <dirent.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/strings.h"

namespace llm {
namespace {

absl::StatusOr<std::vector<int>> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) {
    return absl::InternalError(StrCat("sched_getaffinity: ", std::strerror(errno)));
  }
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

bool IsComputeThread(const std::string& name) {
  return name == "llm-step" || absl::StartsWith(name, "llm-pool-");
}

// The process's threads: (tid, name).
std::vector<std::pair<pid_t, std::string>> Threads() {
  std::vector<std::pair<pid_t, std::string>> threads;
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return threads;
  while (const dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream comm(StrCat("/proc/self/task/", e->d_name, "/comm"));
    std::string name;
    std::getline(comm, name);
    threads.emplace_back(static_cast<pid_t>(std::stol(e->d_name)), name);
  }
  closedir(dir);
  return threads;
}

int CountCompute(const std::vector<std::pair<pid_t, std::string>>& threads) {
  int n = 0;
  for (const auto& t : threads) n += IsComputeThread(t.second) ? 1 : 0;
  return n;
}

}  // namespace

absl::Status CheckPinnable(int compute_cpus) {
  absl::StatusOr<std::vector<int>> cpus = AllowedCpus();
  if (!cpus.ok()) return cpus.status();
  if (compute_cpus < 1 || compute_cpus >= static_cast<int>(cpus->size())) {
    return absl::FailedPreconditionError(
        StrCat("pinning ", compute_cpus, " compute threads needs more CPUs than that (",
               cpus->size(), " available, one at least for the other threads): lower --threads"));
  }
  return absl::OkStatus();
}

absl::StatusOr<ComputeAffinity> PinComputeThreads(int compute_cpus, int expected) {
  if (absl::Status s = CheckPinnable(compute_cpus); !s.ok()) return s;
  absl::StatusOr<std::vector<int>> cpus = AllowedCpus();
  if (!cpus.ok()) return cpus.status();
  ComputeAffinity result;
  result.compute_cpus.assign(cpus->begin(), cpus->begin() + compute_cpus);
  result.other_cpus.assign(cpus->begin() + compute_cpus, cpus->end());
  // Threads name themselves as they start: wait for them.
  const absl::Time give_up = absl::Now() + absl::Seconds(2);
  std::vector<std::pair<pid_t, std::string>> threads = Threads();
  while (CountCompute(threads) < expected && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(10));
    threads = Threads();
  }
  auto set_of = [](const std::vector<int>& list) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int cpu : list) CPU_SET(cpu, &set);
    return set;
  };
  const cpu_set_t compute = set_of(result.compute_cpus), other = set_of(result.other_cpus);
  for (const auto& [tid, name] : threads) {
    const bool is_compute = IsComputeThread(name);
    if (sched_setaffinity(tid, sizeof(cpu_set_t), is_compute ? &compute : &other) != 0) {
      if (errno == ESRCH) continue;  // it ended meanwhile
      return absl::InternalError(
          StrCat("sched_setaffinity of thread ", name, ": ", std::strerror(errno)));
    }
    result.compute_threads += is_compute ? 1 : 0;
  }
  if (result.compute_threads == 0) {
    return absl::FailedPreconditionError("no compute thread (llm-step, llm-pool-N) to pin");
  }
  return result;
}

}  // namespace llm
