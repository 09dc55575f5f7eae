// Creates the backend a flag names: "cpu", "cuda" or "auto" (CUDA when this
// build has it and a device is present, else CPU).
#ifndef LLM_MODEL_SVC_BACKEND_BACKEND_FACTORY_H_
#define LLM_MODEL_SVC_BACKEND_BACKEND_FACTORY_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model_svc/core/backend.h"

namespace llm::model {

struct BackendOptions {
  std::string name = "cpu";  // "cpu", "cuda" or "auto"
  int threads = 0;           // CPU threads; 0: every core the process may use
  // CPU backend: its pool's workers' CPUs (CpuBackendOptions::cpus); empty:
  // their creator's.
  std::vector<int> cpu_pool_cpus;
  int cuda_device = 0;
  bool cuda_graphs = true;
  bool cuda_quantized_weights = true;  // CudaBackendOptions::quantized_weights
  bool cpu_mmap_weights = false;       // CpuBackendOptions::mmap_weights
};

// InvalidArgument for an unknown name; FailedPrecondition for "cuda" when
// this build has no CUDA backend or no device is usable (the message says
// which); cpu_pool_cpus refused as PinThread (common/cpu_set.h) refuses.
absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(const BackendOptions& options);

// True when this build includes the CUDA backend (the plugin libllm_cuda.so
// beside the executables).
bool CudaBackendBuilt();

// OK when the CUDA backend can be created here: the plugin loads and a
// device is usable. Otherwise FailedPrecondition saying why. Cached.
absl::Status CudaBackendStatus();

}  // namespace llm::model

#endif  // LLM_MODEL_SVC_BACKEND_BACKEND_FACTORY_H_
