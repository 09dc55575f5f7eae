// Row-wise and elementwise kernels: embedding gather, RMSNorm, conversion,
// RoPE, SwiGLU, GeGLU, scaling, bias and residual adds, row gather.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "model_svc/backend/cuda/kernels.h"
#include "model_svc/backend/cuda/launch.h"

namespace llm::cuda {
namespace {

constexpr int kThreads = 256;

unsigned Blocks(int64_t count, int threads = kThreads) {
  return static_cast<unsigned>((count + threads - 1) / threads);
}

__device__ __forceinline__ float Load(const void* p, DType type, int64_t i) {
  switch (type) {
    case DType::kF16:
      return __half2float(static_cast<const __half*>(p)[i]);
    case DType::kBF16:
      return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    default:
      return static_cast<const float*>(p)[i];
  }
}

__global__ void EmbedKernel(const void* table, DType type, int64_t cols, const int32_t* tokens,
                            float* out) {
  const int64_t r = blockIdx.x;
  const int64_t base = static_cast<int64_t>(tokens[r]) * cols;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    out[r * cols + c] = Load(table, type, base + c);
  }
}

// Sum over the block; every thread gets the result.
__device__ float BlockSum(float v) {
  LLM_SHARED_ARRAY(float, partial, 32);
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + 31) >> 5;
  v = lane < warps ? partial[lane] : 0.0f;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();  // partial[] may be reused by the caller's next BlockSum
  return v;
}

__global__ void RmsNormKernel(const float* x, const float* w, float eps, int64_t cols, float* out) {
  const int64_t r = blockIdx.x;
  const float* in = x + r * cols;
  float ss = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) ss += in[c] * in[c];
  const float ms = BlockSum(ss) / static_cast<float>(cols);
  const float scale = 1.0f / sqrtf(ms + eps);
  // BlockSum ends with a barrier, so writing in place (out == x) is safe.
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    out[r * cols + c] = in[c] * scale * w[c];
  }
}

__global__ void ConvertKernel(const float* x, int64_t count, DType to, void* out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count) return;
  if (to == DType::kF16) {
    static_cast<__half*>(out)[i] = __float2half_rn(x[i]);
  } else if (to == DType::kBF16) {
    static_cast<__nv_bfloat16*>(out)[i] = __float2bfloat16_rn(x[i]);
  } else {
    static_cast<float*>(out)[i] = x[i];
  }
}

// One thread per (row, head of q or k, pair).
__global__ void RopeKernel(float* q, int64_t q_heads, float* k, int64_t k_heads, int64_t rows,
                           const int32_t* positions, int32_t head_dim, int32_t pairs,
                           float theta_scale, float freq_scale, bool neox,
                           const float* freq_factors, RopeScaling scaling) {
  const int64_t per_row = (q_heads + k_heads) * pairs;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= rows * per_row) return;
  const int64_t r = t / per_row;
  int64_t rest = t % per_row;
  const int64_t head = rest / pairs;
  const int32_t i = static_cast<int32_t>(rest % pairs);
  float* v = head < q_heads ? q + (r * q_heads + head) * head_dim
                            : k + (r * k_heads + (head - q_heads)) * head_dim;
  float theta = static_cast<float>(positions[r]);
  for (int32_t j = 0; j < i; ++j) theta = __fmul_rn(theta, theta_scale);
  const float extrap = freq_factors != nullptr ? __fdiv_rn(theta, freq_factors[i]) : theta;
  const float interp = __fmul_rn(freq_scale, extrap);
  float angle = interp, mscale = scaling.attn_factor;
  if (scaling.ext_factor != 0.0f) {
    const float y = __fdiv_rn(__fsub_rn(static_cast<float>(i), scaling.corr_low),
                              fmaxf(0.001f, __fsub_rn(scaling.corr_high, scaling.corr_low)));
    const float mix = __fmul_rn(1.0f - fminf(1.0f, fmaxf(0.0f, y)), scaling.ext_factor);
    angle = __fadd_rn(__fmul_rn(interp, 1.0f - mix), __fmul_rn(extrap, mix));
    mscale = __fmul_rn(mscale, 1.0f + 0.1f * logf(__fdiv_rn(1.0f, freq_scale)));
  }
  float s, c;
  sincosf(angle, &s, &c);
  s = __fmul_rn(s, mscale);
  c = __fmul_rn(c, mscale);
  // Pair (2i, 2i + 1), or (i, i + pairs) for NEOX.
  const int32_t ia = neox ? i : 2 * i, ib = neox ? i + pairs : 2 * i + 1;
  const float a = v[ia], b = v[ib];
  v[ia] = __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s));
  v[ib] = __fadd_rn(__fmul_rn(a, s), __fmul_rn(b, c));
}

__global__ void SiluMulKernel(const float* gate, const float* up, float* out, int64_t count) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count) return;
  const float g = gate[i];
  out[i] = g / (1.0f + expf(-g)) * up[i];
}

// gelu(g) * up as llama.cpp's CPU backend computes GeGLU (kernels.h).
__global__ void GeluMulKernel(const float* gate, const float* up, float* out, int64_t count) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count) return;
  const float g = gate[i];
  if (g <= -10.0f) {
    out[i] = 0.0f;
  } else if (g >= 10.0f) {
    out[i] = __fmul_rn(g, up[i]);
  } else {
    const float h = __half2float(__float2half_rn(g));
    const float cube = __fadd_rn(1.0f, __fmul_rn(__fmul_rn(0.044715f, h), h));
    const float inner = __fmul_rn(__fmul_rn(0.79788456080286535587989211986876f, h), cube);
    const float gelu = __fmul_rn(__fmul_rn(0.5f, h), __fadd_rn(1.0f, tanhf(inner)));
    out[i] = __fmul_rn(__half2float(__float2half_rn(gelu)), up[i]);
  }
}

__global__ void ScaleKernel(float* x, float s, int64_t count) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) x[i] = __fmul_rn(x[i], s);
}

__global__ void AddRowVectorKernel(float* x, const float* b, int64_t cols, int64_t count) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) x[i] += b[i % cols];
}

__global__ void AddKernel(float* x, const float* y, int64_t count) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) x[i] += y[i];
}

__global__ void GatherRowsKernel(const float* x, int64_t cols, const int32_t* rows, float* out) {
  const int64_t i = blockIdx.x;
  const float* src = x + static_cast<int64_t>(rows[i]) * cols;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) out[i * cols + c] = src[c];
}

}  // namespace

cudaError_t LaunchEmbed(const void* table, DType type, int64_t cols, const int32_t* tokens,
                        int64_t rows, float* out, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  LaunchKernel<EmbedKernel>(static_cast<unsigned>(rows), kThreads, stream, table, type, cols,
                            tokens, out);
  return cudaGetLastError();
}

cudaError_t LaunchRmsNorm(const float* x, const float* w, float eps, int64_t rows, int64_t cols,
                          float* out, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  LaunchKernel<RmsNormKernel>(static_cast<unsigned>(rows), kThreads, stream, x, w, eps, cols, out);
  return cudaGetLastError();
}

cudaError_t LaunchConvert(const float* x, int64_t count, DType to, void* out, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  LaunchKernel<ConvertKernel>(Blocks(count), kThreads, stream, x, count, to, out);
  return cudaGetLastError();
}

cudaError_t LaunchRope(float* q, int64_t q_cols, float* k, int64_t k_cols, int64_t rows,
                       const int32_t* positions, int32_t head_dim, int32_t rope_dim,
                       float theta_scale, float freq_scale, bool neox, const float* freq_factors,
                       const RopeScaling& scaling, cudaStream_t stream) {
  const int32_t pairs = rope_dim / 2;
  const int64_t q_heads = q_cols / head_dim, k_heads = k_cols / head_dim;
  const int64_t total = rows * (q_heads + k_heads) * pairs;
  if (total == 0) return cudaSuccess;
  LaunchKernel<RopeKernel>(Blocks(total), kThreads, stream, q, q_heads, k, k_heads, rows, positions,
                           head_dim, pairs, theta_scale, freq_scale, neox, freq_factors, scaling);
  return cudaGetLastError();
}

cudaError_t LaunchSiluMul(const float* gate, const float* up, float* out, int64_t count,
                          cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  LaunchKernel<SiluMulKernel>(Blocks(count), kThreads, stream, gate, up, out, count);
  return cudaGetLastError();
}

cudaError_t LaunchGeluMul(const float* gate, const float* up, float* out, int64_t count,
                          cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  LaunchKernel<GeluMulKernel>(Blocks(count), kThreads, stream, gate, up, out, count);
  return cudaGetLastError();
}

cudaError_t LaunchScale(float* x, float s, int64_t count, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  LaunchKernel<ScaleKernel>(Blocks(count), kThreads, stream, x, s, count);
  return cudaGetLastError();
}

cudaError_t LaunchAddRowVector(float* x, const float* b, int64_t rows, int64_t cols,
                               cudaStream_t stream) {
  const int64_t count = rows * cols;
  if (count == 0) return cudaSuccess;
  LaunchKernel<AddRowVectorKernel>(Blocks(count), kThreads, stream, x, b, cols, count);
  return cudaGetLastError();
}

cudaError_t LaunchAdd(float* x, const float* y, int64_t count, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  LaunchKernel<AddKernel>(Blocks(count), kThreads, stream, x, y, count);
  return cudaGetLastError();
}

cudaError_t LaunchGatherRows(const float* x, int64_t cols, const int32_t* rows, int64_t n,
                             float* out, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  LaunchKernel<GatherRowsKernel>(static_cast<unsigned>(n), kThreads, stream, x, cols, rows, out);
  return cudaGetLastError();
}

}  // namespace llm::cuda
