// The CUDA emulator's <cuda_fp16.h>: __half and the conversions the kernels
// use, bit-exact with the device's (IEEE binary16, round to nearest even),
// through common/half.h.
#ifndef LLM_MODEL_SVC_BACKEND_CUDA_EMU_INCLUDE_CUDA_FP16_H_
#define LLM_MODEL_SVC_BACKEND_CUDA_EMU_INCLUDE_CUDA_FP16_H_

#include <cstdint>

#include "common/half.h"

struct __half {
  uint16_t bits = 0;
  __half() = default;
  __half(float f) : bits(::llm::FloatToHalf(f)) {}  // NOLINT: as CUDA's (round to nearest)
  operator float() const { return ::llm::HalfToFloat(bits); }
};
static_assert(sizeof(__half) == 2);

inline float __half2float(__half h) { return ::llm::HalfToFloat(h.bits); }
inline __half __float2half_rn(float f) { return __half(f); }
inline __half __float2half(float f) { return __half(f); }
inline uint16_t __half_as_ushort(__half h) { return h.bits; }
inline __half __ushort_as_half(uint16_t bits) {
  __half h;
  h.bits = bits;
  return h;
}

#endif  // LLM_MODEL_SVC_BACKEND_CUDA_EMU_INCLUDE_CUDA_FP16_H_
