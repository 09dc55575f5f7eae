// Host side of the quantized weights kept on the device: which GGUF types
// stay quantized, and their repacking into quant_layout.h's layout.
//
// Thread safety: pure functions.
#ifndef LLM_MODEL_SVC_BACKEND_CUDA_QUANT_UPLOAD_H_
#define LLM_MODEL_SVC_BACKEND_CUDA_QUANT_UPLOAD_H_

#include <cstdint>
#include <optional>

#include "common/gguf/gguf.h"
#include "model_svc/backend/cuda/quant_layout.h"

namespace llm::cuda {

// The layout kind of a GGUF type the device keeps quantized (Q8_0, Q4_0,
// Q4_1, Q4_K, Q5_K, Q6_K); nullopt for the others (dequantized to fp16 at
// upload).
std::optional<QuantKind> QuantKindOf(gguf::TensorType type);

// Writes the rows of `src` (GGUF blocks, `row_bytes` apart) into `dst`,
// layout.bytes() long, in `layout`'s order (layout.data is not used); the
// padding rows of the last group are zero.
void RepackQuant(const uint8_t* src, int64_t row_bytes, const QuantMatrix& layout, uint8_t* dst);

}  // namespace llm::cuda

#endif  // LLM_MODEL_SVC_BACKEND_CUDA_QUANT_UPLOAD_H_
