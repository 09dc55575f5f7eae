// Quantized weights kept quantized on the device: GGUF's 32-element blocks
// of Q8_0, Q4_0 and Q4_1, repacked for coalesced reads by the matrix-vector
// kernel, in which one thread computes one output row.
//
// Rows go in groups of 32 (the last group padded with zero blocks). For each
// group and block index, the 32 rows' quant bytes lie side by side (row
// 32g + l at slot l), so a warp's 32 threads read one contiguous run; the
// scales (fp16 d, and m for Q4_1) are a second plane in the same order. The
// bytes on the device equal the GGUF's (rows padded to a multiple of 32):
// 34 per block for Q8_0, 18 for Q4_0, 20 for Q4_1.
//
// Plain C++ with host and device inline functions: the .cu kernels, the
// host's repacking (quant_upload.h) and the tests share it.
#ifndef LLM_MODEL_SVC_BACKEND_CUDA_QUANT_LAYOUT_H_
#define LLM_MODEL_SVC_BACKEND_CUDA_QUANT_LAYOUT_H_

#include <cstdint>

#if defined(__CUDACC__)
#define LLM_HOST_DEVICE __host__ __device__
#else
#define LLM_HOST_DEVICE
#endif

namespace llm::cuda {

enum class QuantKind : int32_t { kQ8_0 = 0, kQ4_0 = 1, kQ4_1 = 2 };

inline constexpr int kQuantBlock = 32;  // elements per block
inline constexpr int kQuantGroup = 32;  // rows per group

struct QuantMatrix {
  const uint8_t* data = nullptr;  // device memory, bytes() long
  QuantKind kind = QuantKind::kQ8_0;
  int64_t rows = 0, cols = 0;  // cols: a multiple of kQuantBlock

  LLM_HOST_DEVICE int64_t blocks() const { return cols / kQuantBlock; }
  LLM_HOST_DEVICE int64_t groups() const { return (rows + kQuantGroup - 1) / kQuantGroup; }
  LLM_HOST_DEVICE int32_t quant_bytes() const { return kind == QuantKind::kQ8_0 ? 32 : 16; }
  LLM_HOST_DEVICE int32_t scale_bytes() const { return kind == QuantKind::kQ4_1 ? 4 : 2; }
  // The slot of row r's block b (the index into either plane).
  LLM_HOST_DEVICE int64_t slot(int64_t r, int64_t b) const {
    return ((r / kQuantGroup) * blocks() + b) * kQuantGroup + r % kQuantGroup;
  }
  LLM_HOST_DEVICE int64_t slots() const { return groups() * blocks() * kQuantGroup; }
  LLM_HOST_DEVICE int64_t scales_offset() const { return slots() * quant_bytes(); }
  LLM_HOST_DEVICE int64_t bytes() const { return slots() * (quant_bytes() + scale_bytes()); }
};

}  // namespace llm::cuda

#endif  // LLM_MODEL_SVC_BACKEND_CUDA_QUANT_LAYOUT_H_
