// The CUDA emulator's <cuda_bf16.h>: __nv_bfloat16 and its conversions,
// bit-exact with the device's (round to nearest even), through common/half.h.
#ifndef LLM_MODEL_SVC_BACKEND_CUDA_EMU_INCLUDE_CUDA_BF16_H_
#define LLM_MODEL_SVC_BACKEND_CUDA_EMU_INCLUDE_CUDA_BF16_H_

#include <cstdint>

#include "common/half.h"

struct __nv_bfloat16 {
  uint16_t bits = 0;
  __nv_bfloat16() = default;
  __nv_bfloat16(float f) : bits(::llm::FloatToBf16(f)) {}  // NOLINT: as CUDA's
  operator float() const { return ::llm::Bf16ToFloat(bits); }
};
static_assert(sizeof(__nv_bfloat16) == 2);

inline float __bfloat162float(__nv_bfloat16 h) { return ::llm::Bf16ToFloat(h.bits); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }

#endif  // LLM_MODEL_SVC_BACKEND_CUDA_EMU_INCLUDE_CUDA_BF16_H_
