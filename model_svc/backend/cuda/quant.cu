// Kernels over quantized weights kept on the device (quant_layout.h): the
// matrix-vector product for decode (few activation rows), dequantization of
// row tiles to fp16 for cuBLAS (prefill), and the embedding gather.
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>

#include "model_svc/backend/cuda/kernels.h"
#include "model_svc/backend/cuda/launch.h"
#include "model_svc/backend/cuda/quant_layout.h"

namespace llm::cuda {
namespace {

constexpr int kThreads = 128;

unsigned Blocks(int64_t count) { return static_cast<unsigned>((count + kThreads - 1) / kThreads); }

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

// The 32 codes of one block: Q8_0 signed bytes; Q4_0 nibbles - 8; Q4_1
// nibbles (low nibbles are elements 0..15, high 16..31).
template <QuantKind K>
__device__ __forceinline__ int Code(const uint8_t* q, int i) {
  if constexpr (K == QuantKind::kQ8_0) {
    return static_cast<int8_t>(q[i]);
  } else {
    const int nibble = i < 16 ? (q[i] & 0x0F) : (q[i - 16] >> 4);
    return K == QuantKind::kQ4_0 ? nibble - 8 : nibble;
  }
}

// Element y = d * q (+ m), rounded as the reference dequantization does.
template <QuantKind K>
__device__ __forceinline__ float Element(const QuantMatrix& w, int64_t row, int64_t col) {
  const int64_t s = w.slot(row, col / kQuantBlock);
  const uint8_t* q = w.data + s * w.quant_bytes();
  const uint8_t* sc = w.data + w.scales_offset() + s * w.scale_bytes();
  const float y = __fmul_rn(HalfAt(sc), static_cast<float>(Code<K>(q, col % kQuantBlock)));
  return K == QuantKind::kQ4_1 ? __fadd_rn(y, HalfAt(sc + 2)) : y;
}

// One thread per output row (a warp reads 32 rows' blocks side by side);
// R activation rows at once: out[r][row] = sum over blocks of
// d * sum(q * x[r]) (+ m * sum(x[r]) for Q4_1).
template <QuantKind K, int R>
__global__ void MatVecQuantKernel(QuantMatrix w, const float* x, float* out, int64_t out_stride) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= w.rows) return;
  const int64_t nb = w.blocks();
  const int qbytes = w.quant_bytes(), sbytes = w.scale_bytes();
  const uint8_t* scales = w.data + w.scales_offset();
  float acc[R];
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t s = w.slot(row, b);
    alignas(16) uint8_t q[32];
    for (int i = 0; i < qbytes; i += 16) Load16(w.data + s * qbytes + i, q + i);
    const float d = HalfAt(scales + s * sbytes);
    float dot[R], sum[R];
#pragma unroll
    for (int r = 0; r < R; ++r) dot[r] = sum[r] = 0.0f;
    for (int i = 0; i < kQuantBlock; ++i) {
      const float c = static_cast<float>(Code<K>(q, i));
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const float xv = x[r * w.cols + b * kQuantBlock + i];
        dot[r] += c * xv;
        if constexpr (K == QuantKind::kQ4_1) sum[r] += xv;
      }
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
      acc[r] += d * dot[r];
      if constexpr (K == QuantKind::kQ4_1) acc[r] += HalfAt(scales + s * sbytes + 2) * sum[r];
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r) out[r * out_stride + row] = acc[r];
}

// One thread per (row of the tile, block): 32 fp16 values.
template <QuantKind K>
__global__ void DequantizeQuantKernel(QuantMatrix w, int64_t row0, int64_t rows, __half* out) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t nb = w.blocks();
  if (t >= rows * nb) return;
  const int64_t r = t / nb, b = t % nb;
  for (int i = 0; i < kQuantBlock; ++i) {
    out[r * w.cols + b * kQuantBlock + i] =
        __float2half_rn(Element<K>(w, row0 + r, b * kQuantBlock + i));
  }
}

template <QuantKind K>
__global__ void EmbedQuantKernel(QuantMatrix w, const int32_t* tokens, float* out) {
  const int64_t r = blockIdx.x;
  const int64_t token = tokens[r];
  for (int64_t c = threadIdx.x; c < w.cols; c += blockDim.x) {
    out[r * w.cols + c] = Element<K>(w, token, c);
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
  switch (w.kind) {
    case QuantKind::kQ8_0:
      LaunchMatVecTyped<QuantKind::kQ8_0>(w, x, rows, out, out_stride, stream);
      break;
    case QuantKind::kQ4_0:
      LaunchMatVecTyped<QuantKind::kQ4_0>(w, x, rows, out, out_stride, stream);
      break;
    case QuantKind::kQ4_1:
      LaunchMatVecTyped<QuantKind::kQ4_1>(w, x, rows, out, out_stride, stream);
      break;
  }
  return cudaGetLastError();
}

cudaError_t LaunchDequantizeQuant(const QuantMatrix& w, int64_t row0, int64_t rows, uint16_t* out,
                                  cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  const unsigned grid = Blocks(rows * w.blocks());
  __half* o = reinterpret_cast<__half*>(out);
  switch (w.kind) {
    case QuantKind::kQ8_0:
      LaunchKernel<DequantizeQuantKernel<QuantKind::kQ8_0>>(grid, kThreads, stream, w, row0, rows,
                                                            o);
      break;
    case QuantKind::kQ4_0:
      LaunchKernel<DequantizeQuantKernel<QuantKind::kQ4_0>>(grid, kThreads, stream, w, row0, rows,
                                                            o);
      break;
    case QuantKind::kQ4_1:
      LaunchKernel<DequantizeQuantKernel<QuantKind::kQ4_1>>(grid, kThreads, stream, w, row0, rows,
                                                            o);
      break;
  }
  return cudaGetLastError();
}

cudaError_t LaunchEmbedQuant(const QuantMatrix& w, const int32_t* tokens, int64_t rows, float* out,
                             cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  const unsigned grid = static_cast<unsigned>(rows);
  switch (w.kind) {
    case QuantKind::kQ8_0:
      LaunchKernel<EmbedQuantKernel<QuantKind::kQ8_0>>(grid, 256, stream, w, tokens, out);
      break;
    case QuantKind::kQ4_0:
      LaunchKernel<EmbedQuantKernel<QuantKind::kQ4_0>>(grid, 256, stream, w, tokens, out);
      break;
    case QuantKind::kQ4_1:
      LaunchKernel<EmbedQuantKernel<QuantKind::kQ4_1>>(grid, 256, stream, w, tokens, out);
      break;
  }
  return cudaGetLastError();
}

}  // namespace llm::cuda
