// Small vector kernels for the CPU backend's attention and norms: fp32 dot
// products, and fp32 x fp16 (x Q8_0) products over an fp16 (Q8_0) KV cache; the host's
// logits encodings (core/logits.h) use them too.
//
// Chosen once at startup like quant.h's kernels: AVX2+FMA+F16C when the CPU
// has them, else portable loops. Every function is pure over its arguments.
#ifndef LLM_MODEL_SVC_KERNELS_VEC_H_
#define LLM_MODEL_SVC_KERNELS_VEC_H_

#include <cstdint>

namespace llm::kernels {

// sum(a[i] * b[i]).
float DotF32(const float* a, const float* b, int64_t n);
// sum(a[i] * half(b[i])).
float DotF32F16(const float* a, const uint16_t* b, int64_t n);
// out[i] += w * b[i].
void AxpyF32(float w, const float* b, float* out, int64_t n);
// out[i] += w * half(b[i]).
void AxpyF16(float w, const uint16_t* b, float* out, int64_t n);
// x[i] += y[i] (the residual add).
void AddF32(float* x, const float* y, int64_t n);
// out[i] = x[i] * scale * w[i], the first product first (RMSNorm's scaling).
// out may be x.
void ScaleMulF32(const float* x, float scale, const float* w, float* out, int64_t n);
// RoPE on adjacent pairs: with (c, s) = (cs[2i], cs[2i + 1]) and (a, b) =
// (v[2i], v[2i + 1]), v[2i] = a * c - b * s and v[2i + 1] = a * s + b * c
// (each product rounded, no fused multiply-add), for i < pairs.
void RotatePairs(float* v, const float* cs, int64_t pairs);
// RoPE on halves (NEOX): the same with (a, b) = (v[i], v[i + pairs]).
void RotateHalves(float* v, const float* cs, int64_t pairs);
// x[i] *= s.
void ScaleF32(float* x, float s, int64_t n);
// out[i] = half(x[i]), round to nearest even.
void F32ToF16(const float* x, uint16_t* out, int64_t n);
// max(x[i]) (-inf for n == 0; NaN when any element is NaN).
float MaxF32(const float* x, int64_t n);
// The first i with x[i] > threshold (false for NaN on either side), or n.
int64_t FirstAbove(const float* x, int64_t n, float threshold);
// sum(exp(x[i] - shift)), for x[i] <= shift, in float lanes summed in double.
// The AVX2 version uses a polynomial exp (relative error < 2e-7).
double SumExpF32(const float* x, int64_t n, float shift);
// out[i] = x[i] where bit i of `bits` is set (bit i % 64 of bits[i / 64]),
// else -inf (a token mask on a logits row). out may be x.
void MaskF32(const float* x, const uint64_t* bits, float* out, int64_t n);

// Attention over one KV block, `rows` positions whose vectors lie `stride`
// elements apart:
//   out[r] = scale * sum_i q[i] * k[r * stride + i]          (DotRows)
//   acc[i] += sum_r w[r] * v[r * stride + i], r in order      (AxpyRows)
// for fp16 (uint16_t) or fp32 caches. For n = 64 and 128 (the usual head
// dimensions) the accumulators stay in registers across the rows; every n
// gives the bits of DotF32F16/DotF32 and AxpyF16/AxpyF32 row by row.
void DotRows(const float* q, const uint16_t* k, int64_t stride, int64_t rows, int64_t n,
             float scale, float* out);
void DotRows(const float* q, const float* k, int64_t stride, int64_t rows, int64_t n, float scale,
             float* out);
void AxpyRows(const float* w, const uint16_t* v, int64_t stride, int64_t rows, int64_t n,
              float* acc);
void AxpyRows(const float* w, const float* v, int64_t stride, int64_t rows, int64_t n, float* acc);
// DotRows and AxpyRows for the g query heads (1 <= g <= kMaxRowHeads) that
// share a KV head, reading each row of k / v once instead of g times (on an
// fp16 cache, converting it once): q[h] with out[h], and w[h] with acc[h],
// for h < g. Head h gets exactly the bits of DotRows(q[h], ..., out[h]) and
// AxpyRows(w[h], ..., acc[h]).
inline constexpr int kMaxRowHeads = 4;
void DotRowsHeads(const float* const* q, int g, const uint16_t* k, int64_t stride, int64_t rows,
                  int64_t n, float scale, float* const* out);
void DotRowsHeads(const float* const* q, int g, const float* k, int64_t stride, int64_t rows,
                  int64_t n, float scale, float* const* out);
void AxpyRowsHeads(const float* const* w, int g, const uint16_t* v, int64_t stride, int64_t rows,
                   int64_t n, float* const* acc);
void AxpyRowsHeads(const float* const* w, int g, const float* v, int64_t stride, int64_t rows,
                   int64_t n, float* const* acc);
// A KV cache row of Q8_0 blocks (GGUF's and llama.cpp's Q8_0, 34 bytes):
// element i of a block is d * q[i], d the fp16 bits of the scale.
struct KvQ8Block {
  uint16_t d;
  int8_t q[32];
};
static_assert(sizeof(KvQ8Block) == 34);
// n values (n % 32 == 0) into n / 32 blocks as llama.cpp's x86
// quantize_row_q8_0 writes them: amax = max |x|, d = half(amax / 127),
// q = nearbyint(x * (127 / amax)) (round half to even; 0 when amax is 0).
void QuantizeKvQ8(const float* x, KvQ8Block* out, int64_t n);
// out[i] = float(d) * q[i] (exact: an int8 times an fp16 fits a float).
void DequantizeKvQ8(const KvQ8Block* x, float* out, int64_t n);
// DotRowsHeads and AxpyRowsHeads over Q8_0 rows: element e of the rows is
// element e % 32 of block e / 32 (stride and n multiples of 32). Each head
// gets exactly the bits of the fp32 overloads over the dequantized rows
// (DequantizeKvQ8), as the product d * q is exact; the AVX-512 kernels
// (head dimensions 64, 128, 256) convert each block in registers once for
// all g heads, the others dequantize a few rows at a time into a buffer.
void DotRowsHeads(const float* const* q, int g, const KvQ8Block* k, int64_t stride, int64_t rows,
                  int64_t n, float scale, float* const* out);
void AxpyRowsHeads(const float* const* w, int g, const KvQ8Block* v, int64_t stride, int64_t rows,
                   int64_t n, float* const* acc);
// The scores of nq queries over one run of rows, each query over its own
// part [begin[i], end[i]) of the run (0 <= begin[i] <= end[i] <= rows; an
// empty part is skipped): out[i][r - begin[i]] = scale * sum_e q[i][e] *
// k[r * stride + e], with the bits of DotRowsHeads (and so of DotRows) for
// that query and row. For a prefill chunk, whose queries share most rows:
// the AVX-512 version (head dimensions 64, 128, 256) converts 16 rows at a
// time to fp32 once for all the queries and sums each query's products for
// the 16 rows in 16 accumulators, without DotRowsHeads' horizontal sums
// (attention_bench: ~1.26x its speed per score at 64 dimensions, the same at
// 256, where both are bound by the fmas); elsewhere it is DotRowsHeads query
// by query.
void DotRowsQueries(const float* const* q, int nq, const uint16_t* k, int64_t stride, int64_t rows,
                    int64_t n, float scale, const int64_t* begin, const int64_t* end,
                    float* const* out);
void DotRowsQueries(const float* const* q, int nq, const float* k, int64_t stride, int64_t rows,
                    int64_t n, float scale, const int64_t* begin, const int64_t* end,
                    float* const* out);
void DotRowsQueries(const float* const* q, int nq, const KvQ8Block* k, int64_t stride, int64_t rows,
                    int64_t n, float scale, const int64_t* begin, const int64_t* end,
                    float* const* out);
// out[i] = silu(gate[i]) * up[i], silu(g) = g / (1 + exp(-g)) (SwiGLU),
// bit for bit as the scalar loop with libm's expf computes it: the AVX2 and
// AVX-512 versions evaluate glibc's expf algorithm in vector lanes. (A cheaper
// polynomial exp, within 1e-6, changed the default model's greedy answers at
// near-ties.) out may alias gate or up.
void SiluMul(const float* gate, const float* up, float* out, int64_t n);
// out[i] = gelu(gate[i]) * up[i] with GELU's tanh approximation, as
// llama.cpp's CPU backend computes GeGLU: 0 for gate <= -10, gate * up for
// gate >= 10, else table[half(gate)] * up, where table[h] =
// half(0.5 g (1 + tanhf(sqrt(2/pi) g (1 + 0.044715 g^2)))) for g = float(h),
// in float, each operation rounded. out may alias gate or up.
void GeluMul(const float* gate, const float* up, float* out, int64_t n);
// out[i] = float(half(x[i])): x rounded to fp16 (nearest even). x may be out.
void RoundThroughF16(const float* x, float* out, int64_t n);
// x[i] = exp(x[i] - shift) for x[i] <= shift; returns the sum (in double).
double ExpInPlace(float* x, int64_t n, float shift);

namespace vec_internal {
// The AVX2 versions (vec_avx2.cc); only called when the CPU has AVX2, FMA and F16C.
float DotF32Avx2(const float* a, const float* b, int64_t n);
float DotF32F16Avx2(const float* a, const uint16_t* b, int64_t n);
void AxpyF32Avx2(float w, const float* b, float* out, int64_t n);
void AddF32Avx2(float* x, const float* y, int64_t n);
void ScaleMulF32Avx2(const float* x, float scale, const float* w, float* out, int64_t n);
void RotatePairsAvx2(float* v, const float* cs, int64_t pairs);
void AxpyF16Avx2(float w, const uint16_t* b, float* out, int64_t n);
void F32ToF16Avx2(const float* x, uint16_t* out, int64_t n);
float MaxF32Avx2(const float* x, int64_t n);
int64_t FirstAboveAvx2(const float* x, int64_t n, float threshold);
double SumExpF32Avx2(const float* x, int64_t n, float shift);
void MaskF32Avx2(const float* x, const uint64_t* bits, float* out, int64_t n);
double ExpInPlaceAvx2(float* x, int64_t n, float shift);
void DotRowsAvx2(const float* q, const uint16_t* k, int64_t stride, int64_t rows, int64_t n,
                 float scale, float* out);
void DotRowsAvx2(const float* q, const float* k, int64_t stride, int64_t rows, int64_t n,
                 float scale, float* out);
void AxpyRowsAvx2(const float* w, const uint16_t* v, int64_t stride, int64_t rows, int64_t n,
                  float* acc);
void AxpyRowsAvx2(const float* w, const float* v, int64_t stride, int64_t rows, int64_t n,
                  float* acc);
void DotRowsHeadsAvx2(const float* const* q, int g, const uint16_t* k, int64_t stride, int64_t rows,
                      int64_t n, float scale, float* const* out);
void DotRowsHeadsAvx2(const float* const* q, int g, const float* k, int64_t stride, int64_t rows,
                      int64_t n, float scale, float* const* out);
void AxpyRowsHeadsAvx2(const float* const* w, int g, const uint16_t* v, int64_t stride,
                       int64_t rows, int64_t n, float* const* acc);
void AxpyRowsHeadsAvx2(const float* const* w, int g, const float* v, int64_t stride, int64_t rows,
                       int64_t n, float* const* acc);
void RoundThroughF16Avx2(const float* x, float* out, int64_t n);
// std::exp(x[i]) with the same bits (glibc's expf algorithm, 8 lanes).
void ExpLibmAvx2(const float* x, float* out, int64_t n);
void SiluMulAvx2(const float* gate, const float* up, float* out, int64_t n);

// The AVX-512 versions (vec_avx512.cc), with the AVX2 versions' bits; only
// called when internal::CpuHasAvx512Vnni() (they need AVX-512F and VL; VNNI
// comes with every AVX-512 CPU worth dispatching for). SiLU's exp ~40%
// faster: two permutes instead of gathers, and eight double lanes per op.
void ExpLibmAvx512(const float* x, float* out, int64_t n);
// ScaleF32, 16 lanes an operation (the same products).
void ScaleF32Avx512(float* x, float s, int64_t n);
// SumExpF32Avx2's bits, 16 lanes per operation (the log-sum-exp of every
// logits row: ~0.6 of its time).
double SumExpF32Avx512(const float* x, int64_t n, float shift);
// MaskF32, 16 lanes a mask register.
void MaskF32Avx512(const float* x, const uint64_t* bits, float* out, int64_t n);
void SiluMulAvx512(const float* gate, const float* up, float* out, int64_t n);
// DotRowsHeads / AxpyRowsHeads for head dimensions 64 and 128 (false, doing
// nothing, for any other): a zmm accumulator holds both chains of the AVX2
// kernel, and 32 registers keep 4 rows x 3 heads of them (attention at 16
// sessions: ~half the time of the AVX2 kernels per item).
bool DotRowsHeadsAvx512(const float* const* q, int g, const uint16_t* k, int64_t stride,
                        int64_t rows, int64_t n, float scale, float* const* out);
bool DotRowsHeadsAvx512(const float* const* q, int g, const float* k, int64_t stride, int64_t rows,
                        int64_t n, float scale, float* const* out);
bool AxpyRowsHeadsAvx512(const float* const* w, int g, const uint16_t* v, int64_t stride,
                         int64_t rows, int64_t n, float* const* acc);
bool AxpyRowsHeadsAvx512(const float* const* w, int g, const float* v, int64_t stride, int64_t rows,
                         int64_t n, float* const* acc);
bool DotRowsHeadsAvx512(const float* const* q, int g, const KvQ8Block* k, int64_t stride,
                        int64_t rows, int64_t n, float scale, float* const* out);
bool AxpyRowsHeadsAvx512(const float* const* w, int g, const KvQ8Block* v, int64_t stride,
                         int64_t rows, int64_t n, float* const* acc);
// DotRowsQueries for head dimensions 64, 128 and 256 (false, doing nothing,
// for any other).
bool DotRowsQueriesAvx512(const float* const* q, int nq, const uint16_t* k, int64_t stride,
                          int64_t rows, int64_t n, float scale, const int64_t* begin,
                          const int64_t* end, float* const* out);
bool DotRowsQueriesAvx512(const float* const* q, int nq, const float* k, int64_t stride,
                          int64_t rows, int64_t n, float scale, const int64_t* begin,
                          const int64_t* end, float* const* out);
bool DotRowsQueriesAvx512(const float* const* q, int nq, const KvQ8Block* k, int64_t stride,
                          int64_t rows, int64_t n, float scale, const int64_t* begin,
                          const int64_t* end, float* const* out);
}  // namespace vec_internal

}  // namespace llm::kernels

#endif  // LLM_MODEL_SVC_KERNELS_VEC_H_
