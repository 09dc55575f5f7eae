// Logit readout on the device: log-sum-exp, top-N candidates, fp16 rows.
#include <cuda_fp16.h>

#include <cmath>

#include "model_svc/backend/cuda/kernels.h"
#include "model_svc/backend/cuda/launch.h"

namespace llm::cuda {
namespace {

constexpr int kThreads = 1024;
static_assert(kTopChunk == 2 * kThreads, "one thread per pair of a chunk");

__global__ void LogSumExpKernel(const float* logits, int64_t vocab, float* out) {
  const float* row = logits + static_cast<int64_t>(blockIdx.x) * vocab;
  LLM_SHARED_ARRAY(float, s_max, 32);
  LLM_SHARED_ARRAY(double, s_sum, 32);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;

  float m = -INFINITY;
  for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) m = fmaxf(m, row[i]);
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  if (lane == 0) s_max[warp] = m;
  __syncthreads();
  m = -INFINITY;
  for (int w = 0; w < warps; ++w) m = fmaxf(m, s_max[w]);
  if (!isfinite(m)) {
    if (threadIdx.x == 0) out[blockIdx.x] = m;
    return;
  }

  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
    sum += exp(static_cast<double>(row[i]) - static_cast<double>(m));
  }
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if (lane == 0) s_sum[warp] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    double total = 0.0;
    for (int w = 0; w < warps; ++w) total += s_sum[w];
    out[blockIdx.x] = static_cast<float>(static_cast<double>(m) + log(total));
  }
}

// a comes before b: larger logit, then lower id.
__device__ __forceinline__ bool Before(const TopCandidate& a, const TopCandidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

// Block (i, chunk): bitonic sort of the chunk's kTopChunk logits of row
// rows[i] in shared memory (padding sorts last), then the first `keep` out.
__global__ void TopCandidatesKernel(const float* logits, int64_t vocab, const int32_t* rows,
                                    int64_t keep, TopCandidate* out) {
  LLM_SHARED_ARRAY(TopCandidate, s, kTopChunk);
  const int64_t i = blockIdx.x, chunk = blockIdx.y;
  const float* row = logits + static_cast<int64_t>(rows[i]) * vocab;
  for (int t = threadIdx.x; t < kTopChunk; t += blockDim.x) {
    const int64_t id = chunk * kTopChunk + t;
    s[t] = id < vocab ? TopCandidate{row[id], static_cast<int32_t>(id)}
                      : TopCandidate{-INFINITY, kNoCandidate};
  }
  __syncthreads();
  // Ascending order of "Before" (best first).
  for (int size = 2; size <= kTopChunk; size <<= 1) {
    for (int stride = size >> 1; stride > 0; stride >>= 1) {
      for (int t = threadIdx.x; t < kTopChunk / 2; t += blockDim.x) {
        const int a = 2 * t - (t & (stride - 1));
        const int b = a + stride;
        const bool best_first = (a & size) == 0;
        const TopCandidate x = s[a], y = s[b];
        if (Before(y, x) == best_first) {
          s[a] = y;
          s[b] = x;
        }
      }
      __syncthreads();
    }
  }
  TopCandidate* o = out + (i * gridDim.y + chunk) * keep;
  for (int t = threadIdx.x; t < keep; t += blockDim.x) o[t] = s[t];
}

__global__ void RowsToHalfKernel(const float* logits, int64_t vocab, const int32_t* rows,
                                 uint16_t* out) {
  const int64_t i = blockIdx.y;
  const float* row = logits + static_cast<int64_t>(rows[i]) * vocab;
  const int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j < vocab) out[i * vocab + j] = __half_as_ushort(__float2half_rn(row[j]));
}

}  // namespace

cudaError_t LaunchLogSumExp(const float* logits, int64_t rows, int64_t vocab, float* out,
                            cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  LaunchKernel<LogSumExpKernel>(static_cast<unsigned>(rows), 256, stream, logits, vocab, out);
  return cudaGetLastError();
}

cudaError_t LaunchTopCandidates(const float* logits, int64_t vocab, const int32_t* rows, int64_t n,
                                int64_t keep, TopCandidate* out, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (keep < 1 || keep > kTopChunk) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(n), static_cast<unsigned>(TopChunks(vocab)));
  LaunchKernel<TopCandidatesKernel>(grid, kThreads, stream, logits, vocab, rows, keep, out);
  return cudaGetLastError();
}

cudaError_t LaunchRowsToHalf(const float* logits, int64_t vocab, const int32_t* rows, int64_t n,
                             uint16_t* out, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>((vocab + 255) / 256), static_cast<unsigned>(n));
  LaunchKernel<RowsToHalfKernel>(grid, 256, stream, logits, vocab, rows, out);
  return cudaGetLastError();
}

}  // namespace llm::cuda
