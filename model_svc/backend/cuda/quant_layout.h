// Quantized weights kept quantized on the device: GGUF's blocks of Q8_0,
// Q4_0 and Q4_1 (32 elements) and the super-blocks of Q4_K, Q5_K and Q6_K
// (256 elements: eight 32-element sub-blocks), repacked for coalesced reads
// by the matrix-vector kernel, in which one thread computes one output row.
//
// Rows go in groups of 32 (the last group padded with zero blocks). A
// block's bytes are split in two planes:
//   - quant bytes (the codes: Q8_0 qs; Q4_0 / Q4_1 qs; Q4_K qs; Q5_K qh then
//     qs; Q6_K ql then qh), cut in 16-byte chunks. For each group, block
//     index and chunk, the 32 rows' chunks lie side by side (row 32g + l at
//     lane l), so a warp's 32 threads loading one chunk each read one
//     contiguous run of 512 bytes;
//   - scale bytes (Q8_0 / Q4_0 d; Q4_1 d, m; Q4_K / Q5_K d, dmin and the 12
//     packed scale bytes; Q6_K the 16 int8 scales then d), in GGUF's byte
//     order, one slot per (group, block, row) in the same group order.
// The bytes on the device equal the GGUF's (rows padded to a multiple of
// 32): per block 34 for Q8_0, 18 for Q4_0, 20 for Q4_1, 144 for Q4_K, 176
// for Q5_K, 210 for Q6_K.
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

enum class QuantKind : int32_t { kQ8_0, kQ4_0, kQ4_1, kQ4_K, kQ5_K, kQ6_K };

inline constexpr int kQuantSubBlock = 32;  // elements per (sub-)block: the kernels' unit
inline constexpr int kQuantGroup = 32;     // rows per group
inline constexpr int kQuantChunk = 16;     // bytes per chunk of the quant plane

// Whether a kind's blocks are 256-element super-blocks.
LLM_HOST_DEVICE constexpr bool IsSuperBlockKind(QuantKind k) {
  return k == QuantKind::kQ4_K || k == QuantKind::kQ5_K || k == QuantKind::kQ6_K;
}

struct QuantMatrix {
  const uint8_t* data = nullptr;  // device memory, bytes() long
  QuantKind kind = QuantKind::kQ8_0;
  int64_t rows = 0, cols = 0;  // cols: a multiple of block_elements()

  LLM_HOST_DEVICE int64_t block_elements() const { return IsSuperBlockKind(kind) ? 256 : 32; }
  LLM_HOST_DEVICE int64_t blocks() const { return cols / block_elements(); }
  LLM_HOST_DEVICE int64_t groups() const { return (rows + kQuantGroup - 1) / kQuantGroup; }
  LLM_HOST_DEVICE int32_t quant_bytes() const {
    switch (kind) {
      case QuantKind::kQ8_0:
        return 32;
      case QuantKind::kQ4_K:
        return 128;
      case QuantKind::kQ5_K:
        return 160;
      case QuantKind::kQ6_K:
        return 192;
      default:  // Q4_0, Q4_1
        return 16;
    }
  }
  LLM_HOST_DEVICE int32_t scale_bytes() const {
    switch (kind) {
      case QuantKind::kQ4_1:
        return 4;
      case QuantKind::kQ4_K:
      case QuantKind::kQ5_K:
        return 16;
      case QuantKind::kQ6_K:
        return 18;
      default:  // Q8_0, Q4_0
        return 2;
    }
  }
  LLM_HOST_DEVICE int32_t chunks() const { return quant_bytes() / kQuantChunk; }
  // The slot of row r's block b (the index into the scale plane).
  LLM_HOST_DEVICE int64_t slot(int64_t r, int64_t b) const {
    return ((r / kQuantGroup) * blocks() + b) * kQuantGroup + r % kQuantGroup;
  }
  LLM_HOST_DEVICE int64_t slots() const { return groups() * blocks() * kQuantGroup; }
  // The byte offset of chunk c of row r's block b (in the quant plane, which
  // starts at data).
  LLM_HOST_DEVICE int64_t chunk_offset(int64_t r, int64_t b, int32_t c) const {
    const int64_t lane = r % kQuantGroup;
    return (((slot(r, b) - lane) * chunks() + int64_t{c} * kQuantGroup) + lane) * kQuantChunk;
  }
  LLM_HOST_DEVICE int64_t scales_offset() const { return slots() * quant_bytes(); }
  LLM_HOST_DEVICE int64_t bytes() const { return slots() * (quant_bytes() + scale_bytes()); }
};

}  // namespace llm::cuda

#endif  // LLM_MODEL_SVC_BACKEND_CUDA_QUANT_LAYOUT_H_
