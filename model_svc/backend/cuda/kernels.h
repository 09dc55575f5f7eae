// The CUDA backend's kernels, behind plain launch functions (no CUDA syntax
// here, so host C++ compiled by g++ can call them).
//
// Every launcher enqueues work on `stream` and returns the launch's error
// (cudaGetLastError); none synchronizes. Matrices are row-major and dense:
// row r of an [rows x cols] matrix starts at r * cols.
//
// CUDA graphs: the step's varying inputs (tokens, positions, block tables,
// logit rows) are read from device memory, never passed by value, so a
// captured decode step replays correctly with new contents in the same
// buffers. Scalars passed by value are constant for a model.
#ifndef LLM_MODEL_SVC_BACKEND_CUDA_KERNELS_H_
#define LLM_MODEL_SVC_BACKEND_CUDA_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "model_svc/backend/cuda/quant_layout.h"

namespace llm::cuda {

// Element type of a weight or of converted activations in device memory.
enum class DType : int32_t { kF32 = 0, kF16 = 1, kBF16 = 2 };

inline int64_t DTypeBytes(DType t) { return t == DType::kF32 ? 4 : 2; }

// out[r] = table[tokens[r]] as fp32; table is [vocab x cols] of `type`.
cudaError_t LaunchEmbed(const void* table, DType type, int64_t cols, const int32_t* tokens,
                        int64_t rows, float* out, cudaStream_t stream);

// out[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w. `out` may be `x`.
cudaError_t LaunchRmsNorm(const float* x, const float* w, float eps, int64_t rows, int64_t cols,
                          float* out, cudaStream_t stream);

// out[i] = x[i] converted to `to` (round to nearest even), i < count.
cudaError_t LaunchConvert(const float* x, int64_t count, DType to, void* out, cudaStream_t stream);

// Rotates pairs i < rope_dim / 2 of every head of q and k, (2i, 2i+1) or
// with `neox` (i, i + rope_dim / 2), by positions[r] * theta_scale^i /
// freq_factors[i] * freq_scale (freq_factors: device [rope_dim / 2], or
// null for 1), the angle computed as llama.cpp does (float, theta advanced
// by repeated multiplication); cos and sin multiplied by attn_factor, and
// YaRN's mix when ext_factor != 0 (backend.h, RopeParams).
struct RopeScaling {
  float attn_factor = 1.0f;
  float ext_factor = 0.0f;
  float corr_low = 0.0f, corr_high = 0.0f;
};
cudaError_t LaunchRope(float* q, int64_t q_cols, float* k, int64_t k_cols, int64_t rows,
                       const int32_t* positions, int32_t head_dim, int32_t rope_dim,
                       float theta_scale, float freq_scale, bool neox, const float* freq_factors,
                       const RopeScaling& scaling, cudaStream_t stream);

// out = silu(gate) * up, elementwise over count values.
cudaError_t LaunchSiluMul(const float* gate, const float* up, float* out, int64_t count,
                          cudaStream_t stream);

// out = gelu(gate) * up over count values, as the CPU backend computes it
// (backend.h, GeluMul: fp16-rounded input and GELU, tanh approximation).
cudaError_t LaunchGeluMul(const float* gate, const float* up, float* out, int64_t count,
                          cudaStream_t stream);

// x *= s over count values.
cudaError_t LaunchScale(float* x, float s, int64_t count, cudaStream_t stream);

// x[r] += b for every row of an [rows x cols] matrix (a bias).
cudaError_t LaunchAddRowVector(float* x, const float* b, int64_t rows, int64_t cols,
                               cudaStream_t stream);

// x += y over count values.
cudaError_t LaunchAdd(float* x, const float* y, int64_t count, cudaStream_t stream);

// out[i] = x[rows[i]] for i < n (rows of `cols` floats).
cudaError_t LaunchGatherRows(const float* x, int64_t cols, const int32_t* rows, int64_t n,
                             float* out, cudaStream_t stream);

// The paged KV cache: blocks of `block_size` positions; within a block, for
// each layer, the keys of every slot (kv_dim elements each), then the values.
// Elements are IEEE half (f16) or fp32.
struct KvCacheView {
  void* data = nullptr;
  int64_t layers = 0;
  int64_t kv_dim = 0;
  int32_t block_size = 16;
  bool f16 = true;
};

// Per-row step metadata in device memory: row r's KV position (the slot it
// writes, and the last position it attends to), and where its sequence's
// block table starts in `blocks`.
struct RowKv {
  const int32_t* kv_pos = nullptr;        // [rows]
  const int32_t* table_offset = nullptr;  // [rows]
  const int32_t* blocks = nullptr;        // block ids, tables back to back
};

// Writes k[r] and v[r] (kv_dim floats each) at `layer`, position kv_pos[r].
cudaError_t LaunchStoreKv(const float* k, const float* v, int64_t rows, const RowKv& meta,
                          const KvCacheView& cache, int64_t layer, cudaStream_t stream);

struct AttentionShape {
  int32_t head_count = 0;
  int32_t head_count_kv = 0;
  int32_t head_dim = 0;  // a multiple of 32, at most 256
  float scale = 0.0f;
  int32_t window = 0;  // > 0: positions (kv_pos[r] - window, kv_pos[r]] only
};

// Causal attention of each row's query heads over positions [0, kv_pos[r]]
// (or the window's) of its sequence (grouped-query), one thread block per (row, head) with an
// online softmax; with an f16 cache the query is rounded to half first, as
// the CPU backend and llama.cpp do. out has q's shape [rows x heads*head_dim].
cudaError_t LaunchAttention(const float* q, int64_t rows, const RowKv& meta,
                            const KvCacheView& cache, int64_t layer, const AttentionShape& shape,
                            float* out, cudaStream_t stream);

// True when LaunchAttention supports this head dimension.
bool AttentionSupportsHeadDim(int64_t head_dim);

// --- Quantized weights (quant_layout.h) ---------------------------------------

// Activation rows up to which a MatMul with a quantized weight runs the
// matrix-vector kernel (decode); more go through fp16 tiles and cuBLAS.
inline constexpr int64_t kMaxMatVecRows = 8;

// out[r * out_stride + i] = sum_k w[i][k] * x[r * w.cols + k] for r < rows
// (<= kMaxMatVecRows) and i < w.rows: one thread per weight row; per
// 32-element sub-block, its codes times fp32 activations, times its scale
// (Q6_K: one per 16 elements), plus its offset times the activations' sum
// (Q4_1's m, Q4_K / Q5_K's -dmin * mn), accumulated in fp32.
cudaError_t LaunchMatVecQuant(const QuantMatrix& w, const float* x, int64_t rows, float* out,
                              int64_t out_stride, cudaStream_t stream);

// out[r * w.cols + c] = half(w[row0 + r][c]) for r < rows: a tile of the
// weight dequantized for cuBLAS (each element rounded as the reference
// dequantization computes it, then to fp16).
cudaError_t LaunchDequantizeQuant(const QuantMatrix& w, int64_t row0, int64_t rows, uint16_t* out,
                                  cudaStream_t stream);

// out[r] = w[tokens[r]] as fp32 (exact dequantization).
cudaError_t LaunchEmbedQuant(const QuantMatrix& w, const int32_t* tokens, int64_t rows, float* out,
                             cudaStream_t stream);

// --- Logits -----------------------------------------------------------------

// out[r] = log(sum(exp(logits[r]))) for r < rows, accumulated in double
// after subtracting the row's max (a non-finite max is returned as is).
cudaError_t LaunchLogSumExp(const float* logits, int64_t rows, int64_t vocab, float* out,
                            cudaStream_t stream);

// A candidate for a top-N selection.
struct TopCandidate {
  float logit;
  int32_t id;  // kNoCandidate for padding
};
inline constexpr int32_t kNoCandidate = 0x7fffffff;

// Logits per chunk of the top-N candidate kernel, and the largest N it serves.
inline constexpr int64_t kTopChunk = 2048;
inline constexpr int64_t kMaxDeviceTopN = 1024;
inline int64_t TopChunks(int64_t vocab) { return (vocab + kTopChunk - 1) / kTopChunk; }

// For each i < n: sorts every chunk of kTopChunk logits of row rows[i] by
// descending logit (ties: lower id first) and writes the first `keep`
// (<= kTopChunk) to out[(i * TopChunks(vocab) + chunk) * keep ...]. The N
// largest of a row are among its chunks' first N, so the host finishes the
// selection over TopChunks(vocab) * keep candidates instead of `vocab`.
cudaError_t LaunchTopCandidates(const float* logits, int64_t vocab, const int32_t* rows, int64_t n,
                                int64_t keep, TopCandidate* out, cudaStream_t stream);

// out[i * vocab + j] = half(logits[rows[i] * vocab + j]) (IEEE bits).
cudaError_t LaunchRowsToHalf(const float* logits, int64_t vocab, const int32_t* rows, int64_t n,
                             uint16_t* out, cudaStream_t stream);

}  // namespace llm::cuda

#endif  // LLM_MODEL_SVC_BACKEND_CUDA_KERNELS_H_
