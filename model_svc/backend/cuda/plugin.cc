// The plugin's entry points (plugin.h).
#include "model_svc/backend/cuda/plugin.h"

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model_svc/backend/cuda/cuda_backend.h"

extern "C" {

__attribute__((visibility("default"))) void* llm_cuda_device_status() {
  return new absl::Status(llm::cuda::CudaDeviceStatus());
}

__attribute__((visibility("default"))) void* llm_cuda_create_backend(const void* options) {
  return new absl::StatusOr<std::unique_ptr<llm::model::Backend>>(
      llm::cuda::CreateCudaBackend(*static_cast<const llm::cuda::CudaBackendOptions*>(options)));
}

}  // extern "C"
