// Internal interface of the CPU quantized-weight kernels: the kernel sets
// behind the dispatching functions of quant.h (scalar, AVX2, AVX-512 VNNI),
// exposed so that tests and benchmarks can run each on the same data.
//
// Contracts are those of the matching quant.h functions. The *Avx2 functions
// may only be called when CpuHasAvx2Fma() is true (they are compiled with
// -mavx2 -mfma -mf16c in quant_avx2.cc), the *Avx512Vnni ones only when
// CpuHasAvx512Vnni() is true (quant_avx512.cc), the *Amx ones only when
// CpuHasAmxInt8() is true (quant_amx.cc).
//
// All sets follow the canonical order of quant.h, so MatMulTile, DotRow and
// QuantizeQ8 give the same bits in each; the scalar set is the readable
// reference.
#ifndef LLM_MODEL_SVC_KERNELS_QUANT_INTERNAL_H_
#define LLM_MODEL_SVC_KERNELS_QUANT_INTERNAL_H_

#include <cstddef>
#include <cstdint>

#include "model_svc/formats/blocks.h"
#include "model_svc/kernels/quant.h"

namespace llm::kernels::internal {

// The block layouts (formats/blocks.h), by the short names the kernels use.
using formats::Half;
using formats::IQ4XSScale;
using formats::kIQ4_NLBytes;
using formats::kIQ4_XSBytes;
using formats::kIQ4NLValues;
using formats::kQ2_KBytes;
using formats::kQ3_KBytes;
using formats::kQ4_0Bytes;
using formats::kQ4_1Bytes;
using formats::kQ4_KBytes;
using formats::kQ5_0Bytes;
using formats::kQ5_1Bytes;
using formats::kQ5_KBytes;
using formats::kQ6_KBytes;
using formats::kQ8_0Bytes;
using formats::kSuperBlock;
using formats::LoadU16;
using formats::LoadU32;
using formats::Q3KScales;
using formats::Q4KScaleMin;

// True when the CPU runs AVX2 and FMA instructions (and F16C, which every
// AVX2 CPU has; it is checked too).
bool CpuHasAvx2Fma();

// True when, besides CpuHasAvx2Fma(), the CPU (and the OS, for the zmm state)
// supports AVX-512 F, BW, VL and VNNI.
bool CpuHasAvx512Vnni();

// True when, besides CpuHasAvx512Vnni(), the CPU has AMX-TILE and AMX-INT8,
// the OS enables their state (XCR0 bits 17 and 18), and Linux granted this
// process the tile data state (arch_prctl ARCH_REQ_XCOMP_PERM, asked once:
// the grant covers every thread of the process). Checked once; the answer is
// kept.
bool CpuHasAmxInt8();

// Portable reference kernels. DequantizeRowScalar is formats::DequantizeRow.
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

// AVX-512 VNNI kernels: MatMulTile with 2 or more tokens for every quantized
// type, and with one token for the K-quants, Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0
// (MatVecAvx512Vnni, whole tiles of 16 rows); every other case (one token of
// the other formats, and a single token left after groups of 16; the float
// types) is passed to MatMulTileAvx2. QuantizeQ8Avx512 produces
// exactly QuantizeQ8Avx2's blocks (16 lanes at a time). DequantizeRow has no AVX-512 variant (the
// set uses the AVX2 one). Same per-thread scratch as AVX2.
void QuantizeQ8Avx512(const float* x, BlockQ8* out, int64_t n);
float DotRowAvx512Vnni(TensorType type, const void* w, const ActRow& x, int64_t n);
void MatMulTileAvx512Vnni(TensorType type, const uint8_t* w, size_t row_bytes, int64_t n,
                          int64_t r0, int64_t r1, const ActRow* x, int64_t num_tokens, float* out,
                          int64_t out_stride);

// AMX int8 (quant_amx.cc): MatMulTile with whole tiles of 16 rows x 16
// tokens of the formats with one integer sum per 32-element block (Q4_0,
// Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, IQ4_NL, IQ4_XS) on AMX tiles; every
// other case (the rows and tokens left over, the other types) is passed to
// MatMulTileAvx512Vnni. Only when CpuHasAmxInt8() is true. Per-thread
// scratch: the tokens' codes and one 16-row tile's unpacked codes.
void MatMulTileAmx(TensorType type, const uint8_t* w, size_t row_bytes, int64_t n, int64_t r0,
                   int64_t r1, const ActRow* x, int64_t num_tokens, float* out, int64_t out_stride);

// AVX-512 VNNI one-token product of the K-quants (Q2_K, Q3_K, Q4_K, Q5_K,
// Q6_K), and of Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 rows of a multiple of 64
// elements (Q8_0: and of 1024 or more):
// out[r] = dot(row r, x) for the rows [r0, r0 + k) it returns, k the largest
// multiple of 16 rows not past r1 (0 for other types or lengths, or rows too
// long for its 32-bit offsets); the caller does the rest. The bits are
// MatMulTileAvx2's.
int64_t MatVecAvx512Vnni(TensorType type, const uint8_t* w, size_t row_bytes, int64_t n, int64_t r0,
                         int64_t r1, const BlockQ8* x, float* out);

// The calling thread's live SameActivationsScope: a number no other scope
// had, or 0 outside one.
uint64_t CurrentActivationsScope();

// Aborts with `what` (a broken precondition, e.g. an unsupported type).
[[noreturn]] void Fatal(const char* what);

}  // namespace llm::kernels::internal

#endif  // LLM_MODEL_SVC_KERNELS_QUANT_INTERNAL_H_
