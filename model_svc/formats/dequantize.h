// The reference dequantization of a weight row: what the bytes of each
// supported format (weight_formats.h) mean as floats, decoded by
// block_decode.h, every operation rounded in fp32 as written (compiled with
// -ffp-contract=off). The CPU kernels' scalar set uses it as is
// (kernels/quant.h: DequantizeRow picks a faster one where the CPU allows,
// equal but for the fused d * q + m of Q4_1, Q5_1, Q4_K and Q5_K).
//
// Thread safety: pure. Cost: O(n), scalar.
#ifndef LLM_MODEL_SVC_FORMATS_DEQUANTIZE_H_
#define LLM_MODEL_SVC_FORMATS_DEQUANTIZE_H_

#include <cstdint>

#include "common/gguf/gguf.h"

namespace llm::formats {

// Writes the `n` values of one row of `type` (a supported weight type, `n` a
// multiple of its block size). Element i of a quantized row is
// d * q_i (+ m): Q4_0 q - 8, Q5_0 q - 16, Q8_0 q, Q4_1/Q5_1 d * q + m,
// Q4_K/Q5_K (d * sc_j) * q - (dmin * mn_j), Q6_K/Q3_K (d * sc_half) * q,
// Q2_K (d * sc_half) * q - (dmin * mn_half), IQ4_NL d * kIQ4NLValues[q],
// IQ4_XS (d * ls_j) * kIQ4NLValues[q]. Aborts on an unsupported type.
void DequantizeRow(gguf::TensorType type, const void* row, float* out, int64_t n);

}  // namespace llm::formats

#endif  // LLM_MODEL_SVC_FORMATS_DEQUANTIZE_H_
