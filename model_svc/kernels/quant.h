// Quantized weight formats on the CPU: dequantization and dot products.
//
// Weights stay in their GGUF block formats (GGUF.md §4). A matrix-vector or
// matrix-matrix product first quantizes the activations once per step into
// blocks of 32 int8 values (`BlockQ8`, llama.cpp's Q8_0/Q8_1 idea), then each
// weight row is dotted with them using integer multiply-adds. F32, F16 and
// BF16 weights are dotted with the fp32 activations directly. Which types
// and row lengths they take: formats/weight_formats.h; their block layouts:
// formats/blocks.h. Namespace llm::kernels: the CPU backend calls these, and
// the CUDA backend dequantizes with DequantizeRow at upload.
//
// Kernels are chosen once at startup from the CPU's features: AMX int8 for
// whole 16 x 16 tiles of multi-token products (prefill) where the CPU and
// the OS allow it, AVX-512 VNNI
// (multi-token products of the common formats and one-token products of the
// K-quants; AVX2 for the rest) when
// present, else AVX2+FMA, else a portable scalar path. All give the same bits.
//
// Batch invariance. The result for one (weight row, token) does not depend on
// anything else in the call: the other rows and tokens, the row range, the
// number of tokens, the kernel set or how callers split the work. Every
// kernel performs exactly the fp32 operations of the canonical order below,
// in that order, and vectorizes across rows and tokens only (never across
// blocks). So a request gives the same logits alone or batched, in one
// prefill step or in chunks, on 1 or N threads: without this, a last-bit
// difference flips an int8 rounding of the next layer's activations and
// grows to ~1e-2 in the logits.
//
// Canonical order, quantized weights: with acc = 0, for each 32-element block
// b = 0, 1, ... of the row in turn (a K-quant super-block is 8 such blocks),
//   isum_b = sum over the block of qw * x.q      (int32, exact in any order)
//   acc = fma(dw_b * x.d, float(isum_b), acc)    (dw_b * x.d rounded to fp32)
//   acc = fma(m_b, x.s, acc)                     (formats with a min only)
// and the result is acc. qw are the signed codes: Q4_0 q - 8, Q5_0 q - 16,
// Q4_1/Q5_1/Q4_K/Q5_K q, Q8_0 q, IQ4_NL/IQ4_XS the table value
// kvalues_iq4nl[q] (in [-127, 113]); for Q6_K, isum_b = sc_lo * (sum of
// elements 0..15) + sc_hi * (sum of 16..31) with the halves' int8 scales
// (exact), and likewise for Q3_K (qw = q - 4 unless the hmask bit is set,
// sc the 6-bit scale - 32) and Q2_K (qw = q in [0, 3], sc the 4-bit scale).
// dw_b: the block's d (fp16 -> fp32); Q4_K/Q5_K: d * sc_j rounded to fp32;
// Q6_K/Q3_K/Q2_K: the super-block's d; IQ4_XS: d * (ls_j - 32) rounded to
// fp32. m_b: Q4_1/Q5_1 the block's m; Q4_K/Q5_K: -(dmin * mn_j) rounded to
// fp32. Q2_K has a min per 16 elements instead, so its min step is a second
// block step on the activations' codes:
//   msum_b = mn_lo * (sum of x.q over 0..15) + mn_hi * (sum over 16..31)
//   acc = fma((-dmin) * x.d, float(msum_b), acc)  (after the isum_b step)
// with the halves' 4-bit mins mn and the super-block's dmin. x is the
// token's BlockQ8 of the same 32 columns.
//
// Canonical order, float weights (F32, F16, BF16): eight fp32 lanes
// k = 0..7 start at 0 and take lane_k = fma(w_i, x_i, lane_k) for
// i = k, k + 8, k + 16, ... in turn; the result is
// ((lane_0 + lane_4) + (lane_2 + lane_6)) + ((lane_1 + lane_5) + (lane_3 + lane_7)).
//
// Thread safety: every function here is pure over its arguments; callers
// split rows across threads.
#ifndef LLM_MODEL_SVC_KERNELS_QUANT_H_
#define LLM_MODEL_SVC_KERNELS_QUANT_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/gguf/gguf.h"

namespace llm::kernels {

using gguf::TensorType;

// 32 activations quantized symmetrically: x[i] ~= d * q[i], q[i] in [-127, 127]
// (the kernels rely on that range: -128 could overflow their int16 sums).
// `s` = d * sum(q), used by formats with a per-block minimum (Q4_1, Q5_1,
// Q4_K, Q5_K).
struct BlockQ8 {
  float d;
  float s;
  int8_t q[32];
};
static_assert(sizeof(BlockQ8) == 40);

inline constexpr int64_t kQ8Block = 32;

// Writes the `n` values of one row (`n` a multiple of the type's block size):
// formats::DequantizeRow's values (formats/dequantize.h), but for Q4_1, Q5_1,
// Q4_K and Q5_K, where the AVX2 kernels round d * q + m once (fused).
void DequantizeRow(TensorType type, const void* row, float* out, int64_t n);

// Quantizes `n` activations (`n` a multiple of 32) into n/32 blocks.
void QuantizeQ8(const float* x, BlockQ8* out, int64_t n);

// The activations of one token, in the form every weight type needs.
struct ActRow {
  const float* f32;   // n floats
  const BlockQ8* q8;  // n/32 blocks (may be null when only float weights are used)
};

// Dot product of weight row `w` (type `type`, `n` elements) with activations
// x, in the canonical order: the bits of MatMulTile for that row and token.
float DotRow(TensorType type, const void* w, const ActRow& x, int64_t n);

// Tile product: for rows r in [r0, r1) of a weight matrix whose row stride is
// `row_bytes`, and tokens t in [0, num_tokens):
//   out[t * out_stride + r] = dot(W[r], x[t])
// Kernels reuse each unpacked weight block across several tokens, so this is
// much faster than calling DotRow per pair when num_tokens > 1; the results
// are bit-identical to DotRow's (batch invariance, above).
// Cost: with 3 or more tokens the AVX2 kernels (2 or more: the AVX-512 ones)
// first interleave the tokens' activations (O(num_tokens * n), about 10% of a
// 16-row call), so give each
// call many rows (64 or more) when it carries many tokens, or call it in a
// SameActivationsScope (below), where the AVX-512 kernels interleave once. Decode (1 token)
// streams the rows in order; contiguous row ranges per thread suit it best.
// x[t].q8 is required for quantized types, x[t].f32 for F32/F16/BF16; n must
// be a multiple of 32 (and of 256 for the K-quants and IQ4_XS), see
// formats::CheckWeightShape.
void MatMulTile(TensorType type, const uint8_t* w, size_t row_bytes, int64_t n, int64_t r0,
                int64_t r1, const ActRow* x, int64_t num_tokens, float* out, int64_t out_stride);

// A promise, by the thread that creates it and for as long as it lives, that
// the activations its MatMulTile calls read do not change: calls with the
// same x and num_tokens then lay the tokens out once (the AVX-512 kernels'
// interleaving, ~0.5 us a call at 16 tokens and 576 columns) instead of once
// a call, so that a product can go in small pieces (the CPU backend's
// batched steps, which share their rows out with stealing, and its
// two-token decode ranges). Calls with other
// activations lay theirs out as usual. Scopes do not nest.
class SameActivationsScope {
 public:
  SameActivationsScope();
  ~SameActivationsScope();
  SameActivationsScope(const SameActivationsScope&) = delete;
  SameActivationsScope& operator=(const SameActivationsScope&) = delete;
};

// Which kernel set is active: "avx512vnni+amx" (AMX int8 tiles for the
// multi-token products of most formats; LLM_NO_AMX=1 in the environment turns
// them off), "avx512vnni", "avx2" or "scalar".
std::string_view KernelIsa();

}  // namespace llm::kernels

#endif  // LLM_MODEL_SVC_KERNELS_QUANT_H_
