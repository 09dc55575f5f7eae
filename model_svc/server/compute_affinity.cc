#include "model_svc/server/compute_affinity.h"

#include "common/cpu_set.h"
#include "common/strings.h"

namespace llm {

absl::StatusOr<ComputeAffinity> SplitCpus(const std::vector<int>& allowed, int compute_cpus) {
  if (compute_cpus < 1 || compute_cpus >= static_cast<int>(allowed.size())) {
    return absl::FailedPreconditionError(
        StrCat("pinning needs 1 to ", static_cast<int>(allowed.size()) - 1, " compute CPUs (",
               allowed.size(), " available, one at least for the other threads), not ",
               compute_cpus, ": set --threads"));
  }
  ComputeAffinity result;
  result.compute_cpus.assign(allowed.begin(), allowed.begin() + compute_cpus);
  result.other_cpus.assign(allowed.begin() + compute_cpus, allowed.end());
  result.all_cpus = allowed;
  return result;
}

absl::Status CheckPinnable(int compute_cpus) {
  absl::StatusOr<std::vector<int>> allowed = ThisThreadCpus();
  if (!allowed.ok()) return allowed.status();
  return SplitCpus(*allowed, compute_cpus).status();
}

}  // namespace llm
