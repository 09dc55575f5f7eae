// The CUDA emulator's device-side API for kernels compiled by the host
// compiler: the qualifiers, the built-in coordinates, __syncthreads, the
// warp shuffles and __syncwarp, atomics, the rounding intrinsics, the math
// functions the kernels call, and LLM_SHARED_ARRAY (a __shared__ array
// whose elements the race check sees). Included through
// model_svc/backend/cuda/launch.h by the .cu files when __CUDACC__ is not
// defined; execution model and faults: emulator.h.
#ifndef LLM_MODEL_SVC_BACKEND_CUDA_EMU_DEVICE_H_
#define LLM_MODEL_SVC_BACKEND_CUDA_EMU_DEVICE_H_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <math.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "model_svc/backend/cuda/emu/emulator.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
// A plain __shared__ variable: one per OS thread, reused by each block (no
// race check: declare arrays with LLM_SHARED_ARRAY).
#define __shared__ static thread_local

#define threadIdx (::llm::cuda::emu::ThreadIdx())
#define blockIdx (::llm::cuda::emu::BlockIdx())
#define blockDim (::llm::cuda::emu::BlockDim())
#define gridDim (::llm::cuda::emu::GridDim())
#define warpSize 32

namespace llm::cuda::emu {

// One element of a shared array, as the race check sees it: reading
// converts, writing assigns.
template <typename T>
class SharedRef {
 public:
  SharedRef(T* p, ShadowCell* cell, const char* array, int64_t index)
      : p_(p), cell_(cell), array_(array), index_(index) {}
  operator T() const {  // NOLINT: reads like the element
    SharedAccess(*cell_, p_, /*write=*/false, array_, index_);
    return *p_;
  }
  SharedRef& operator=(const T& v) {
    SharedAccess(*cell_, p_, /*write=*/true, array_, index_);
    *p_ = v;
    return *this;
  }
  SharedRef& operator=(const SharedRef& other) { return *this = static_cast<T>(other); }
  SharedRef& operator+=(const T& v) { return *this = static_cast<T>(*this) + v; }

 private:
  T* p_;
  ShadowCell* cell_;
  const char* array_;
  int64_t index_;
};

// __shared__ T name[N] (one instance per OS thread, reused by each block).
template <typename T, size_t N>
class SharedArray {
 public:
  explicit SharedArray(const char* name) : name_(name) {}
  SharedRef<T> operator[](int64_t i) {
    if (i < 0 || i >= static_cast<int64_t>(N)) {
      SharedOutOfBounds(name_, i, N);
      i = 0;
    }
    return SharedRef<T>(&data_[i], &shadow_[i], name_, i);
  }

 private:
  T data_[N];
  ShadowCell shadow_[N];
  const char* name_;
};

// __shared__ T name[N][M]; a race names the flat index (row * M + column).
template <typename T, size_t N, size_t M>
class SharedArray2 {
 public:
  class Row {
   public:
    Row(SharedArray2* a, int64_t r) : a_(a), r_(r) {}
    SharedRef<T> operator[](int64_t c) {
      if (c < 0 || c >= static_cast<int64_t>(M)) {
        SharedOutOfBounds(a_->name_, r_ * static_cast<int64_t>(M) + c, N * M);
        c = 0;
      }
      const int64_t i = r_ * static_cast<int64_t>(M) + c;
      return SharedRef<T>(&a_->data_[i], &a_->shadow_[i], a_->name_, i);
    }

   private:
    SharedArray2* a_;
    int64_t r_;
  };
  explicit SharedArray2(const char* name) : name_(name) {}
  Row operator[](int64_t r) {
    if (r < 0 || r >= static_cast<int64_t>(N)) {
      SharedOutOfBounds(name_, r * static_cast<int64_t>(M), N * M);
      r = 0;
    }
    return Row(this, r);
  }

 private:
  T data_[N * M];
  ShadowCell shadow_[N * M];
  const char* name_;
};

template <typename T>
T Shuffle(unsigned mask, T v, int src_lane) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>);
  T out;
  WarpExchange(mask, &v, sizeof(T), src_lane, &out);
  return out;
}

inline int Lane() {
  return static_cast<int>(ThreadIdx().x +
                          BlockDim().x * (ThreadIdx().y + BlockDim().y * ThreadIdx().z)) %
         kWarpSize;
}

}  // namespace llm::cuda::emu

#define LLM_SHARED_ARRAY(T, name, n) \
  static thread_local ::llm::cuda::emu::SharedArray<T, (n)> name(#name)
#define LLM_SHARED_ARRAY2(T, name, n, m) \
  static thread_local ::llm::cuda::emu::SharedArray2<T, (n), (m)> name(#name)

inline void __syncthreads() { ::llm::cuda::emu::SyncThreads(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) { ::llm::cuda::emu::SyncWarp(mask); }

// The shuffles (width 32 only, as the kernels use them).
template <typename T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  return ::llm::cuda::emu::Shuffle(mask, v, ::llm::cuda::emu::Lane() ^ lane_mask);
}
template <typename T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  const int src = ::llm::cuda::emu::Lane() + static_cast<int>(delta);
  return ::llm::cuda::emu::Shuffle(mask, v, src < 32 ? src : -1);
}
template <typename T>
T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  return ::llm::cuda::emu::Shuffle(mask, v, ::llm::cuda::emu::Lane() - static_cast<int>(delta));
}
template <typename T>
T __shfl_sync(unsigned mask, T v, int src_lane, int width = 32) {
  return ::llm::cuda::emu::Shuffle(mask, v, src_lane & 31);
}

// Atomics: a kernel's threads never run at once here, so a plain
// read-modify-write is atomic.
template <typename T>
T atomicAdd(T* p, T v) {
  const T old = *p;
  *p = old + v;
  return old;
}
template <typename T>
T atomicMax(T* p, T v) {
  const T old = *p;
  if (v > old) *p = v;
  return old;
}
template <typename T>
T atomicMin(T* p, T v) {
  const T old = *p;
  if (v < old) *p = v;
  return old;
}
template <typename T>
T atomicExch(T* p, T v) {
  const T old = *p;
  *p = v;
  return old;
}
template <typename T>
T atomicCAS(T* p, T compare, T v) {
  const T old = *p;
  if (old == compare) *p = v;
  return old;
}

// IEEE round-to-nearest arithmetic (the emulated kernels are compiled
// without contraction, so a * b + c is two roundings here too).
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline float __int_as_float(int v) {
  float f;
  std::memcpy(&f, &v, 4);
  return f;
}
inline int __float_as_int(float f) {
  int v;
  std::memcpy(&v, &f, 4);
  return v;
}
// dp4a: the dot product of four signed bytes, plus c.
inline int __dp4a(int a, int b, int c) {
  for (int i = 0; i < 4; ++i) {
    c += static_cast<int8_t>(a >> (8 * i)) * static_cast<int8_t>(b >> (8 * i));
  }
  return c;
}

// CUDA's integer min and max.
inline int max(int a, int b) { return a > b ? a : b; }
inline int min(int a, int b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long max(long a, long b) { return a > b ? a : b; }
inline long min(long a, long b) { return a < b ? a : b; }

#endif  // LLM_MODEL_SVC_BACKEND_CUDA_EMU_DEVICE_H_
