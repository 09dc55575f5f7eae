// Test support: a simple reference quantizer for the GGUF weight formats the
// CPU kernels read (round-to-nearest, in the manner of ggml's
// quantize_row_*_ref), used to write random models in every supported type.
//
// It only has to produce valid blocks whose dequantized values are close to
// the input; what the blocks mean is checked through kernels::DequantizeRow.
//
// Threads: pure functions.
#ifndef LLM_MODEL_SVC_TESTING_REFERENCE_QUANT_H_
#define LLM_MODEL_SVC_TESTING_REFERENCE_QUANT_H_

#include <cstdint>
#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "common/gguf/gguf.h"

namespace llm::model::testing {

// Packs `values` (row-major rows of `cols` elements; values.size() a multiple
// of cols) into the bytes of a GGUF tensor of `type`. Types: F32, F16, BF16,
// Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS
// (simple round-to-nearest encodings, not llama.cpp's error-minimizing
// choices). Unimplemented for other types;
// InvalidArgument when cols is not a multiple of the type's block size.
absl::StatusOr<std::string> QuantizeMatrix(gguf::TensorType type, std::span<const float> values,
                                           int64_t cols);

// IEEE half and bfloat16, round-to-nearest-even (NaN stays NaN).
uint16_t FloatToHalfRef(float f);
uint16_t FloatToBf16Ref(float f);

}  // namespace llm::model::testing

#endif  // LLM_MODEL_SVC_TESTING_REFERENCE_QUANT_H_
