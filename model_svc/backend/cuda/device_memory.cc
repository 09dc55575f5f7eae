#include "model_svc/backend/cuda/device_memory.h"

#include <cuda_runtime_api.h>

#include "common/strings.h"
#include "model_svc/backend/cuda/cuda_status.h"

namespace llm::cuda {

absl::StatusOr<DeviceBuffer> DeviceBuffer::Allocate(size_t bytes, std::string_view what) {
  DeviceBuffer b;
  if (bytes == 0) return b;
  LLM_CUDA_RETURN_IF_ERROR(cudaMalloc(&b.data_, bytes),
                           StrCat("cudaMalloc of ", bytes, " bytes for ", what));
  b.bytes_ = bytes;
  LLM_CUDA_RETURN_IF_ERROR(cudaMemset(b.data_, 0, bytes), StrCat("cudaMemset of ", what));
  // The memset runs on the legacy default stream, which the backend's
  // non-blocking stream does not wait for.
  LLM_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize(), StrCat("cudaMemset of ", what));
  return b;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) cudaFree(data_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (data_ != nullptr) cudaFree(data_);
}

absl::StatusOr<PinnedBuffer> PinnedBuffer::Allocate(size_t bytes, std::string_view what) {
  PinnedBuffer b;
  if (bytes == 0) return b;
  LLM_CUDA_RETURN_IF_ERROR(cudaHostAlloc(&b.data_, bytes, cudaHostAllocDefault),
                           StrCat("cudaHostAlloc of ", bytes, " bytes for ", what));
  b.bytes_ = bytes;
  return b;
}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) cudaFreeHost(data_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

PinnedBuffer::~PinnedBuffer() {
  if (data_ != nullptr) cudaFreeHost(data_);
}

}  // namespace llm::cuda
