#include "model_svc/server/compute_affinity.h"

#include <dirent.h>
#include <pthread.h>
#include <sys/types.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>

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

absl::Status CheckCount(int compute_cpus, size_t available) {
  if (compute_cpus < 1 || compute_cpus >= static_cast<int>(available)) {
    return absl::FailedPreconditionError(StrCat(
        "pinning needs 1 to ", static_cast<int>(available) - 1, " compute CPUs (", available,
        " available, one at least for the other threads), not ", compute_cpus, ": set --threads"));
  }
  return absl::OkStatus();
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

cpu_set_t SetOf(const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : cpus) CPU_SET(cpu, &set);
  return set;
}

// Puts every thread on its side; only those not there yet when `only_moved`.
// Returns the number of compute threads, or the first refusal.
absl::StatusOr<int> Place(const cpu_set_t& compute, const cpu_set_t& other, bool only_moved) {
  int compute_threads = 0;
  for (const auto& [tid, name] : Threads()) {
    const bool is_compute = IsComputeThread(name);
    compute_threads += is_compute ? 1 : 0;
    const cpu_set_t& want = is_compute ? compute : other;
    if (only_moved) {
      cpu_set_t now;
      if (sched_getaffinity(tid, sizeof(now), &now) != 0 || CPU_EQUAL(&now, &want)) continue;
    }
    if (sched_setaffinity(tid, sizeof(want), &want) != 0 && errno != ESRCH) {  // ESRCH: ended
      return absl::InternalError(
          StrCat("sched_setaffinity of thread ", name, ": ", std::strerror(errno)));
    }
  }
  return compute_threads;
}

}  // namespace

absl::Status CheckPinnable(int compute_cpus) {
  absl::StatusOr<std::vector<int>> cpus = AllowedCpus();
  if (!cpus.ok()) return cpus.status();
  return CheckCount(compute_cpus, cpus->size());
}

absl::StatusOr<ComputeAffinity> PinComputeThreads(int compute_cpus, int compute_threads) {
  absl::StatusOr<std::vector<int>> cpus = AllowedCpus();
  if (!cpus.ok()) return cpus.status();
  if (absl::Status s = CheckCount(compute_cpus, cpus->size()); !s.ok()) return s;
  ComputeAffinity result;
  result.compute_cpus.assign(cpus->begin(), cpus->begin() + compute_cpus);
  result.other_cpus.assign(cpus->begin() + compute_cpus, cpus->end());
  // Threads name themselves as they start: wait for them.
  const absl::Time give_up = absl::Now() + absl::Seconds(2);
  while (CountCompute(Threads()) < compute_threads && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  absl::StatusOr<int> placed =
      Place(SetOf(result.compute_cpus), SetOf(result.other_cpus), /*only_moved=*/false);
  if (!placed.ok()) return placed.status();
  result.compute_threads = *placed;
  if (result.compute_threads < compute_threads) {
    return absl::FailedPreconditionError(StrCat("found ", result.compute_threads, " of the ",
                                                compute_threads,
                                                " compute threads (llm-step, llm-pool-N) to pin"));
  }
  return result;
}

ThreadPinner::ThreadPinner(const ComputeAffinity& affinity)
    : compute_(SetOf(affinity.compute_cpus)), other_(SetOf(affinity.other_cpus)) {
  thread_ = std::thread([this] { Loop(); });
}

ThreadPinner::~ThreadPinner() {
  stop_.Notify();
  thread_.join();
}

void ThreadPinner::Loop() {
  pthread_setname_np(pthread_self(), "llm-pinner");
  sched_setaffinity(0, sizeof(other_), &other_);
  while (!stop_.WaitForNotificationWithTimeout(absl::Seconds(1))) {
    Place(compute_, other_, /*only_moved=*/true).IgnoreError();  // a refusal: try again
  }
}

}  // namespace llm
