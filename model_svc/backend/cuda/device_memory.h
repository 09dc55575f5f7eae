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

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace llm::cuda {

// Where a buffer lives: how it is allocated and freed.
struct DeviceMemory {
  // Zeroed; ResourceExhausted naming `what` when the device is full.
  static absl::Status Allocate(void** data, size_t bytes, std::string_view what);
  static void Free(void* data);
};
struct PinnedMemory {
  static absl::Status Allocate(void** data, size_t bytes, std::string_view what);
  static void Free(void* data);
};

template <typename Memory>
class Buffer {
 public:
  Buffer() = default;
  // `bytes` of memory (none for 0).
  static absl::StatusOr<Buffer> Allocate(size_t bytes, std::string_view what) {
    Buffer b;
    if (bytes == 0) return b;
    if (absl::Status s = Memory::Allocate(&b.data_, bytes, what); !s.ok()) return s;
    b.bytes_ = bytes;
    return b;
  }

  Buffer(Buffer&& other) noexcept { *this = std::move(other); }
  Buffer& operator=(Buffer&& other) noexcept {
    if (this != &other) {
      if (data_ != nullptr) Memory::Free(data_);
      data_ = std::exchange(other.data_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() {
    if (data_ != nullptr) Memory::Free(data_);
  }

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

using DeviceBuffer = Buffer<DeviceMemory>;
using PinnedBuffer = Buffer<PinnedMemory>;

}  // namespace llm::cuda

#endif  // LLM_MODEL_SVC_BACKEND_CUDA_DEVICE_MEMORY_H_
