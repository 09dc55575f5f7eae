// Owning handles for device memory (cudaMalloc, never managed memory) and
// page-locked host memory (cudaHostAlloc, for asynchronous copies).
//
// Threads: a buffer is used by one thread at a time. Cost: allocation is a
// driver call (slow, may synchronize the device): done at load time or when
// a step needs more than ever before, never per step.
#ifndef LLM_MODEL_SVC_BACKEND_CUDA_DEVICE_MEMORY_H_
#define LLM_MODEL_SVC_BACKEND_CUDA_DEVICE_MEMORY_H_

#include <cstddef>
#include <string_view>
#include <utility>

#include "absl/status/statusor.h"

namespace llm::cuda {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  // `bytes` of zeroed device memory; ResourceExhausted naming `what` when
  // the device is full.
  static absl::StatusOr<DeviceBuffer> Allocate(size_t bytes, std::string_view what);

  DeviceBuffer(DeviceBuffer&& other) noexcept { *this = std::move(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();

  void* get() const { return data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  size_t size() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  static absl::StatusOr<PinnedBuffer> Allocate(size_t bytes, std::string_view what);

  PinnedBuffer(PinnedBuffer&& other) noexcept { *this = std::move(other); }
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer();

  void* get() const { return data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  size_t size() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace llm::cuda

#endif  // LLM_MODEL_SVC_BACKEND_CUDA_DEVICE_MEMORY_H_
