// Kernels over quantized weights kept on the device (quant_layout.h): the
// matrix-vector product for decode (few activation rows), dequantization of
// row tiles to fp16 for cuBLAS (prefill), and the embedding gather. All
// three read a weight 32 elements at a time through Decode: one sub-block's
// codes and scales, in registers.
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "model_svc/backend/cuda/kernels.h"
#include "model_svc/backend/cuda/launch.h"
#include "model_svc/backend/cuda/quant_layout.h"

namespace llm::cuda {
namespace {

constexpr int kThreads = 128;

unsigned Blocks(int64_t count) { return static_cast<unsigned>((count + kThreads - 1) / kThreads); }

// 32-element sub-blocks per block: 8 in a K-quant super-block.
template <QuantKind K>
constexpr int kSubBlocks = IsSuperBlockKind(K) ? 8 : 1;

// Whether an element is scale * q + offset (Q4_1, Q4_K, Q5_K) rather than
// scale * q.
template <QuantKind K>
constexpr bool kHasOffset = K == QuantKind::kQ4_1 || K == QuantKind::kQ4_K || K == QuantKind::kQ5_K;

// The 16 bytes at p (16-byte aligned) into q (16-byte aligned): one vector
// load on the device.
__device__ __forceinline__ void Load16(const uint8_t* p, uint8_t* q) {
#if defined(__CUDACC__)
  *reinterpret_cast<uint4*>(q) = *reinterpret_cast<const uint4*>(p);
#else
  std::memcpy(q, p, 16);
#endif
}

__device__ __forceinline__ float HalfAt(const uint8_t* p) {
  return __half2float(__ushort_as_half(static_cast<uint16_t>(p[0] | (p[1] << 8))));
}

// `n` chunks of row `row`'s block b, from chunk c0 on, into dst (16-byte
// aligned): the block's quant bytes [16 c0, 16 (c0 + n)).
__device__ __forceinline__ void LoadChunks(const QuantMatrix& w, int64_t row, int64_t b, int c0,
                                           int n, uint8_t* dst) {
  for (int c = 0; c < n; ++c) Load16(w.data + w.chunk_offset(row, b, c0 + c), dst + 16 * c);
}

// Q4_K / Q5_K: the 6-bit scale and min of sub-block j (0..7) from the 12
// packed scale bytes at p (formats/blocks.h, Q4KScaleMin).
__device__ __forceinline__ void ScaleMinK4(const uint8_t* p, int j, int* sc, int* mn) {
  if (j < 4) {
    *sc = p[j] & 63;
    *mn = p[j + 4] & 63;
  } else {
    *sc = (p[j + 4] & 0x0F) | ((p[j - 4] >> 6) << 4);
    *mn = (p[j + 4] >> 4) | ((p[j] >> 6) << 4);
  }
}

// One 32-element sub-block of a weight row in registers: element i is
// scale[i / 16] * q[i], plus offset where kHasOffset<K>.
struct SubBlock {
  int q[kQuantSubBlock];
  float scale[2];  // of elements 0..15 and 16..31 (equal but for Q6_K)
  float offset;    // Q4_1: m; Q4_K, Q5_K: -(dmin * mn); else 0
};

// Sub-block j (0 .. kSubBlocks<K> - 1) of row `row`'s block b, decoded as
// the reference dequantization (formats/dequantize.h) reads the GGUF
// block: the scales rounded to fp32 alike (d * sc, dmin * mn).
template <QuantKind K>
__device__ __forceinline__ SubBlock Decode(const QuantMatrix& w, int64_t row, int64_t b, int j) {
  const uint8_t* s = w.data + w.scales_offset() + w.slot(row, b) * w.scale_bytes();
  SubBlock sb;
  sb.offset = 0.0f;
  alignas(16) uint8_t q[32];
  if constexpr (K == QuantKind::kQ8_0) {  // d | qs[32] int8
    LoadChunks(w, row, b, 0, 2, q);
    for (int i = 0; i < 32; ++i) sb.q[i] = static_cast<int8_t>(q[i]);
    sb.scale[0] = sb.scale[1] = HalfAt(s);
  } else if constexpr (K == QuantKind::kQ4_0 || K == QuantKind::kQ4_1) {
    // d (| m) | qs[16]: low nibbles elements 0..15, high nibbles 16..31.
    LoadChunks(w, row, b, 0, 1, q);
    const int zero = K == QuantKind::kQ4_0 ? 8 : 0;
    for (int i = 0; i < 16; ++i) {
      sb.q[i] = (q[i] & 0x0F) - zero;
      sb.q[i + 16] = (q[i] >> 4) - zero;
    }
    sb.scale[0] = sb.scale[1] = HalfAt(s);
    if constexpr (K == QuantKind::kQ4_1) sb.offset = HalfAt(s + 2);
  } else if constexpr (K == QuantKind::kQ4_K || K == QuantKind::kQ5_K) {
    // d | dmin | scales[12] | (Q5_K: qh[32] |) qs[128]: qs[32p, 32p + 32)
    // holds sub-block 2p in its low nibbles and 2p + 1 in its high; Q5_K's
    // bit j of qh[l] is element l's fifth bit.
    LoadChunks(w, row, b, (K == QuantKind::kQ5_K ? 2 : 0) + 2 * (j / 2), 2, q);
    const int shift = 4 * (j % 2);
    for (int l = 0; l < 32; ++l) sb.q[l] = (q[l] >> shift) & 0x0F;
    if constexpr (K == QuantKind::kQ5_K) {
      alignas(16) uint8_t qh[32];
      LoadChunks(w, row, b, 0, 2, qh);
      for (int l = 0; l < 32; ++l) sb.q[l] |= ((qh[l] >> j) & 1) << 4;
    }
    int sc, mn;
    ScaleMinK4(s + 4, j, &sc, &mn);
    sb.scale[0] = sb.scale[1] = __fmul_rn(HalfAt(s), static_cast<float>(sc));
    sb.offset = -__fmul_rn(HalfAt(s + 2), static_cast<float>(mn));
  } else {
    // Q6_K: ql[128] | qh[64] (quant bytes) and scales[16] int8 | d (scale
    // bytes). Sub-block j is quarter k of 128-element half h: low 4 bits
    // from ql[64h + 32(k % 2) + l] (nibble k / 2), high 2 bits from
    // qh[32h + l] (bits 2k), minus 32; scales 2j and 2j + 1.
    static_assert(K == QuantKind::kQ6_K);
    const int h = j / 4, k = j % 4;
    alignas(16) uint8_t qh[32];
    LoadChunks(w, row, b, 4 * h + 2 * (k % 2), 2, q);
    LoadChunks(w, row, b, 8 + 2 * h, 2, qh);
    for (int l = 0; l < 32; ++l) {
      sb.q[l] = (((q[l] >> (4 * (k / 2))) & 0x0F) | (((qh[l] >> (2 * k)) & 3) << 4)) - 32;
    }
    const float d = HalfAt(s + 16);
    sb.scale[0] = __fmul_rn(d, static_cast<float>(static_cast<int8_t>(s[2 * j])));
    sb.scale[1] = __fmul_rn(d, static_cast<float>(static_cast<int8_t>(s[2 * j + 1])));
  }
  return sb;
}

// Element i of a decoded sub-block, rounded as the reference dequantization
// does.
template <QuantKind K>
__device__ __forceinline__ float Value(const SubBlock& sb, int i) {
  const float y = __fmul_rn(sb.scale[i / 16], static_cast<float>(sb.q[i]));
  return kHasOffset<K> ? __fadd_rn(y, sb.offset) : y;
}

// One thread per output row (a warp reads 32 rows' chunks side by side); R
// activation rows at once: out[r][row] = sum over sub-blocks of
// scale_lo * sum(q * x[r]) over the first 16 elements + scale_hi * the same
// over the last 16 (+ offset * sum(x[r])).
template <QuantKind K, int R>
__global__ void MatVecQuantKernel(QuantMatrix w, const float* x, float* out, int64_t out_stride) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= w.rows) return;
  const int64_t nb = w.blocks();
  float acc[R];
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
#pragma unroll
    for (int j = 0; j < kSubBlocks<K>; ++j) {
      const SubBlock sb = Decode<K>(w, row, b, j);
      const float* xs = x + (b * kSubBlocks<K> + j) * kQuantSubBlock;
      float dot[2][R], sum[R];
#pragma unroll
      for (int r = 0; r < R; ++r) dot[0][r] = dot[1][r] = sum[r] = 0.0f;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
#pragma unroll
        for (int i = 16 * half; i < 16 * half + 16; ++i) {
          const float c = static_cast<float>(sb.q[i]);
#pragma unroll
          for (int r = 0; r < R; ++r) {
            const float xv = xs[r * w.cols + i];
            dot[half][r] += c * xv;
            if constexpr (kHasOffset<K>) sum[r] += xv;
          }
        }
      }
#pragma unroll
      for (int r = 0; r < R; ++r) {
        acc[r] += sb.scale[0] * dot[0][r] + sb.scale[1] * dot[1][r];
        if constexpr (kHasOffset<K>) acc[r] += sb.offset * sum[r];
      }
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r) out[r * out_stride + row] = acc[r];
}

// One thread per (row of the tile, sub-block): 32 fp16 values.
template <QuantKind K>
__global__ void DequantizeQuantKernel(QuantMatrix w, int64_t row0, int64_t rows, __half* out) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t subs = w.cols / kQuantSubBlock;
  if (t >= rows * subs) return;
  const int64_t r = t / subs, u = t % subs;
  const SubBlock sb =
      Decode<K>(w, row0 + r, u / kSubBlocks<K>, static_cast<int>(u % kSubBlocks<K>));
  __half* o = out + r * w.cols + u * kQuantSubBlock;
  for (int i = 0; i < kQuantSubBlock; ++i) o[i] = __float2half_rn(Value<K>(sb, i));
}

// One thread block per token, a thread per sub-block of its row.
template <QuantKind K>
__global__ void EmbedQuantKernel(QuantMatrix w, const int32_t* tokens, float* out) {
  const int64_t r = blockIdx.x;
  const int64_t token = tokens[r];
  for (int64_t u = threadIdx.x; u < w.cols / kQuantSubBlock; u += blockDim.x) {
    const SubBlock sb = Decode<K>(w, token, u / kSubBlocks<K>, static_cast<int>(u % kSubBlocks<K>));
    float* o = out + r * w.cols + u * kQuantSubBlock;
    for (int i = 0; i < kQuantSubBlock; ++i) o[i] = Value<K>(sb, i);
  }
}

// Calls f(std::integral_constant<QuantKind, K>{}) for kind K.
template <typename F>
void ForKind(QuantKind kind, F&& f) {
  switch (kind) {
    case QuantKind::kQ8_0:
      f(std::integral_constant<QuantKind, QuantKind::kQ8_0>{});
      break;
    case QuantKind::kQ4_0:
      f(std::integral_constant<QuantKind, QuantKind::kQ4_0>{});
      break;
    case QuantKind::kQ4_1:
      f(std::integral_constant<QuantKind, QuantKind::kQ4_1>{});
      break;
    case QuantKind::kQ4_K:
      f(std::integral_constant<QuantKind, QuantKind::kQ4_K>{});
      break;
    case QuantKind::kQ5_K:
      f(std::integral_constant<QuantKind, QuantKind::kQ5_K>{});
      break;
    case QuantKind::kQ6_K:
      f(std::integral_constant<QuantKind, QuantKind::kQ6_K>{});
      break;
  }
}

template <QuantKind K>
void LaunchMatVecTyped(const QuantMatrix& w, const float* x, int64_t rows, float* out,
                       int64_t out_stride, cudaStream_t stream) {
  const unsigned grid = Blocks(w.rows);
  switch (rows) {
#define LLM_MATVEC_CASE(R)                                                                \
  case R:                                                                                 \
    LaunchKernel<MatVecQuantKernel<K, R>>(grid, kThreads, stream, w, x, out, out_stride); \
    break;
    LLM_MATVEC_CASE(1)
    LLM_MATVEC_CASE(2)
    LLM_MATVEC_CASE(3)
    LLM_MATVEC_CASE(4)
    LLM_MATVEC_CASE(5)
    LLM_MATVEC_CASE(6)
    LLM_MATVEC_CASE(7)
    LLM_MATVEC_CASE(8)
#undef LLM_MATVEC_CASE
  }
}

}  // namespace

cudaError_t LaunchMatVecQuant(const QuantMatrix& w, const float* x, int64_t rows, float* out,
                              int64_t out_stride, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  if (rows > kMaxMatVecRows) return cudaErrorInvalidValue;
  ForKind(w.kind, [&](auto kind) {
    LaunchMatVecTyped<decltype(kind)::value>(w, x, rows, out, out_stride, stream);
  });
  return cudaGetLastError();
}

cudaError_t LaunchDequantizeQuant(const QuantMatrix& w, int64_t row0, int64_t rows, uint16_t* out,
                                  cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  const unsigned grid = Blocks(rows * (w.cols / kQuantSubBlock));
  __half* o = reinterpret_cast<__half*>(out);
  ForKind(w.kind, [&](auto kind) {
    LaunchKernel<DequantizeQuantKernel<decltype(kind)::value>>(grid, kThreads, stream, w, row0,
                                                               rows, o);
  });
  return cudaGetLastError();
}

cudaError_t LaunchEmbedQuant(const QuantMatrix& w, const int32_t* tokens, int64_t rows, float* out,
                             cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  const unsigned grid = static_cast<unsigned>(rows);
  ForKind(w.kind, [&](auto kind) {
    LaunchKernel<EmbedQuantKernel<decltype(kind)::value>>(grid, kThreads, stream, w, tokens, out);
  });
  return cudaGetLastError();
}

}  // namespace llm::cuda
