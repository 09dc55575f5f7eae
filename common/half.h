// IEEE binary16 (fp16) and bfloat16 (bf16) conversion: the one copy every
// component uses (GGUF F16/BF16 weights, the fp16 KV cache, fp16 logits on
// the wire, the CUDA backend's weight upload).
//
// Thread safety: pure functions. Cost: a few integer operations each; out of
// line on purpose, so that files compiled with AVX flags (the kernels) never
// emit a copy the linker could pick for code that runs on any CPU.
#ifndef LLM_COMMON_HALF_H_
#define LLM_COMMON_HALF_H_

#include <cstdint>

namespace llm {

// Exact. A NaN keeps its sign and payload and comes back quiet, as F16C's
// vcvtph2ps does.
float HalfToFloat(uint16_t h);
// Rounds to nearest even; overflow gives inf; NaN stays NaN (quiet, sign kept).
uint16_t FloatToHalf(float f);
// Exact.
float Bf16ToFloat(uint16_t h);
// Rounds to nearest even; NaN stays NaN (quiet, sign kept), overflow gives inf.
uint16_t FloatToBf16(float f);

}  // namespace llm

#endif  // LLM_COMMON_HALF_H_
