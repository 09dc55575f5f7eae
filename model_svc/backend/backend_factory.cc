#include "model_svc/backend/backend_factory.h"

#include "absl/status/status.h"
#include "common/strings.h"
#include "model_svc/backend/cpu/cpu_backend.h"
#if LLM_HAVE_CUDA
#include "model_svc/backend/cuda/cuda_backend.h"
#endif

namespace llm::model {

bool CudaBackendBuilt() { return LLM_HAVE_CUDA != 0; }

absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(const BackendOptions& options) {
  if (options.name != "cpu" && options.name != "cuda" && options.name != "auto") {
    return absl::InvalidArgumentError(
        StrCat("unknown backend \"", options.name, "\" (cpu, cuda or auto)"));
  }
  if (options.name != "cpu") {
#if LLM_HAVE_CUDA
    cuda::CudaBackendOptions cuda_options;
    cuda_options.device = options.cuda_device;
    cuda_options.graphs = options.cuda_graphs;
    if (options.name == "cuda" || cuda::CudaDeviceStatus().ok()) {
      return cuda::CreateCudaBackend(cuda_options);
    }
#else
    if (options.name == "cuda") {
      return absl::FailedPreconditionError(
          "this build has no CUDA backend (nvcc was not found when it was configured)");
    }
#endif
  }
  cpu::CpuBackendOptions cpu_options;
  cpu_options.threads = options.threads;
  return cpu::CreateCpuBackend(cpu_options);
}

}  // namespace llm::model
