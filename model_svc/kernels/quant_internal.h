// Internal interface of the CPU quantized-weight kernels: the kernel sets
// behind the dispatching functions of quant.h (scalar, AVX2, AVX-512 VNNI),
// exposed so that tests and benchmarks can run each on the same data.
//
// Contracts are those of the matching quant.h functions. The *Avx2 functions
// may only be called when CpuHasAvx2Fma() is true (they are compiled with
// -mavx2 -mfma -mf16c in quant_avx2.cc), the *Avx512Vnni ones only when
// CpuHasAvx512Vnni() is true (quant_avx512.cc).
//
// All sets follow the canonical order of quant.h, so MatMulTile, DotRow and
// QuantizeQ8 give the same bits in each; the scalar set is the readable
// reference.
#ifndef LLM_MODEL_SVC_KERNELS_QUANT_INTERNAL_H_
#define LLM_MODEL_SVC_KERNELS_QUANT_INTERNAL_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "model_svc/kernels/quant.h"

namespace llm::cpu::internal {

// Block sizes (bytes) of the ggml formats, for byte-offset arithmetic.
inline constexpr size_t kQ4_0Bytes = 18;     // d fp16 | qs[16]
inline constexpr size_t kQ4_1Bytes = 20;     // d fp16 | m fp16 | qs[16]
inline constexpr size_t kQ5_0Bytes = 22;     // d fp16 | qh u32 | qs[16]
inline constexpr size_t kQ5_1Bytes = 24;     // d fp16 | m fp16 | qh u32 | qs[16]
inline constexpr size_t kQ8_0Bytes = 34;     // d fp16 | qs[32] int8
inline constexpr size_t kQ4_KBytes = 144;    // d | dmin | scales[12] | qs[128]
inline constexpr size_t kQ6_KBytes = 210;    // ql[128] | qh[64] | scales[16] int8 | d
inline constexpr size_t kQ2_KBytes = 84;     // scales[16] (sc | mn << 4) | qs[64] | d | dmin
inline constexpr size_t kQ3_KBytes = 110;    // hmask[32] | qs[64] | scales[12] | d
inline constexpr size_t kQ5_KBytes = 176;    // d | dmin | scales[12] | qh[32] | qs[128]
inline constexpr size_t kIQ4_NLBytes = 18;   // d fp16 | qs[16] (indices into kIQ4NLValues)
inline constexpr size_t kIQ4_XSBytes = 136;  // d | scales_h u16 | scales_l[4] | qs[128]
inline constexpr int64_t kSuperBlock = 256;  // elements of a K-quant super-block

// Elements per weight block of a supported type (1 for the float types).
int64_t BlockElements(TensorType type);

// Unaligned little-endian loads (memcpy: no alignment or aliasing UB).
inline uint16_t LoadU16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
inline uint32_t LoadU32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// Q4_K's 6-bit scale and min of sub-block j (0..7) from the 12 packed scale
// bytes, exactly as ggml's get_scale_min_k4.
inline void Q4KScaleMin(const uint8_t* scales, int j, int* sc, int* mn) {
  if (j < 4) {
    *sc = scales[j] & 63;
    *mn = scales[j + 4] & 63;
  } else {
    *sc = (scales[j + 4] & 0x0F) | ((scales[j - 4] >> 6) << 4);
    *mn = (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4);
  }
}

// Q3_K's 16 signed sub-block scales (6 bits, minus 32: [-32, 31]) from its
// 12 packed scale bytes, exactly as ggml's dequantize_row_q3_K unpacks them:
// scale k has low 4 bits from byte k (k < 8) or the high nibble of byte k - 8,
// and bits 4..5 from byte 8 + k % 4, bits 2 * (k / 4).
inline void Q3KScales(const uint8_t* scales, int8_t out[16]) {
  for (int k = 0; k < 16; ++k) {
    const int low = k < 8 ? scales[k] & 0x0F : scales[k - 8] >> 4;
    const int high = (scales[8 + k % 4] >> (2 * (k / 4))) & 3;
    out[k] = static_cast<int8_t>((low | (high << 4)) - 32);
  }
}

// IQ4_XS's 6-bit scale of sub-block j (0..7), minus 32: [-32, 31].
inline int IQ4XSScale(const uint8_t* block, int j) {
  const int low = (block[4 + j / 2] >> (4 * (j % 2))) & 0x0F;
  const int high = (LoadU16(block + 2) >> (2 * j)) & 3;
  return (low | (high << 4)) - 32;
}

// The 16 non-linear codes of IQ4_NL and IQ4_XS (ggml's kvalues_iq4nl).
inline constexpr int8_t kIQ4NLValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

// True when the CPU runs AVX2 and FMA instructions (and F16C, which every
// AVX2 CPU has; it is checked too).
bool CpuHasAvx2Fma();

// True when, besides CpuHasAvx2Fma(), the CPU (and the OS, for the zmm state)
// supports AVX-512 F, BW, VL and VNNI.
bool CpuHasAvx512Vnni();

// Portable reference kernels.
void DequantizeRowScalar(TensorType type, const void* row, float* out, int64_t n);
void QuantizeQ8Scalar(const float* x, BlockQ8* out, int64_t n);
float DotRowScalar(TensorType type, const void* w, const ActRow& x, int64_t n);
void MatMulTileScalar(TensorType type, const uint8_t* w, size_t row_bytes, int64_t n, int64_t r0,
                      int64_t r1, const ActRow* x, int64_t num_tokens, float* out,
                      int64_t out_stride);

// AVX2+FMA kernels (every supported type). QuantizeQ8Avx2 produces exactly
// the blocks QuantizeQ8Scalar does; DequantizeRowAvx2 exactly its values,
// except for Q4_1, Q5_1, Q4_K and Q5_K, where d * q + m is one fused rounding.
// MatMulTileAvx2 keeps per-thread scratch (grown once, never shrunk).
void DequantizeRowAvx2(TensorType type, const void* row, float* out, int64_t n);
void QuantizeQ8Avx2(const float* x, BlockQ8* out, int64_t n);
float DotRowAvx2(TensorType type, const void* w, const ActRow& x, int64_t n);
void MatMulTileAvx2(TensorType type, const uint8_t* w, size_t row_bytes, int64_t n, int64_t r0,
                    int64_t r1, const ActRow* x, int64_t num_tokens, float* out,
                    int64_t out_stride);

// AVX-512 VNNI kernels: MatMulTile with 2 or more tokens for Q4_0, Q4_1,
// Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, IQ4_NL and IQ4_XS, with 9 or more for Q2_K,
// Q3_K and Q6_K (in groups of 16), and with one token for the K-quants
// (MatVecAvx512Vnni, whole tiles of 16 rows); every other case (one token of
// the other formats, and a single token left after groups of 16; 2-8 tokens
// of Q2_K, Q3_K, Q6_K; the float types) is passed to MatMulTileAvx2. QuantizeQ8Avx512 produces
// exactly QuantizeQ8Avx2's blocks (16 lanes at a time). DequantizeRow has no AVX-512 variant (the
// set uses the AVX2 one). Same per-thread scratch as AVX2.
void QuantizeQ8Avx512(const float* x, BlockQ8* out, int64_t n);
float DotRowAvx512Vnni(TensorType type, const void* w, const ActRow& x, int64_t n);
void MatMulTileAvx512Vnni(TensorType type, const uint8_t* w, size_t row_bytes, int64_t n,
                          int64_t r0, int64_t r1, const ActRow* x, int64_t num_tokens, float* out,
                          int64_t out_stride);

// AVX-512 VNNI one-token product of the K-quants (Q2_K, Q3_K, Q4_K, Q5_K,
// Q6_K):
// out[r] = dot(row r, x) for the rows [r0, r0 + k) it returns, k the largest
// multiple of 16 rows not past r1 (0 for other types, or rows too long for
// its 32-bit offsets); the caller does the rest. The bits are
// MatMulTileAvx2's.
int64_t MatVecAvx512Vnni(TensorType type, const uint8_t* w, size_t row_bytes, int64_t n, int64_t r0,
                         int64_t r1, const BlockQ8* x, float* out);

// The calling thread's live SameActivationsScope: a number no other scope
// had, or 0 outside one.
uint64_t CurrentActivationsScope();

// Aborts with `what` (a broken precondition, e.g. an unsupported type).
[[noreturn]] void Fatal(const char* what);

}  // namespace llm::cpu::internal

#endif  // LLM_MODEL_SVC_KERNELS_QUANT_INTERNAL_H_
