#include "model_svc/backend/cuda/device_memory.h"

#include <cuda_runtime_api.h>

#include "common/strings.h"
#include "model_svc/backend/cuda/cuda_status.h"

namespace llm::cuda {

absl::Status DeviceMemory::Allocate(void** data, size_t bytes, std::string_view what) {
  LLM_CUDA_RETURN_IF_ERROR(cudaMalloc(data, bytes),
                           StrCat("cudaMalloc of ", bytes, " bytes for ", what));
  absl::Status s = CudaStatus(cudaMemset(*data, 0, bytes), StrCat("cudaMemset of ", what));
  // The memset runs on the legacy default stream, which the backend's
  // non-blocking stream does not wait for.
  if (s.ok()) s = CudaStatus(cudaDeviceSynchronize(), StrCat("cudaMemset of ", what));
  if (!s.ok()) {
    cudaFree(*data);
    *data = nullptr;
  }
  return s;
}

void DeviceMemory::Free(void* data) { cudaFree(data); }

absl::Status PinnedMemory::Allocate(void** data, size_t bytes, std::string_view what) {
  return CudaStatus(cudaHostAlloc(data, bytes, cudaHostAllocDefault),
                    StrCat("cudaHostAlloc of ", bytes, " bytes for ", what));
}

void PinnedMemory::Free(void* data) { cudaFreeHost(data); }

}  // namespace llm::cuda
