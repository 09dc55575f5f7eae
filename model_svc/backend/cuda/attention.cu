// Paged-KV attention: storing a step's keys and values, and causal
// grouped-query attention for a mixed batch (prefill chunks and decodes).
#include <cuda_fp16.h>

#include <cmath>

#include "model_svc/backend/cuda/kernels.h"
#include "model_svc/backend/cuda/launch.h"

namespace llm::cuda {
namespace {

constexpr int kWarps = 4;  // warps per (row, head) block

__device__ __forceinline__ float ToFloat(float v) { return v; }
__device__ __forceinline__ float ToFloat(__half v) { return __half2float(v); }
__device__ __forceinline__ void FromFloat(float v, float* out) { *out = v; }
__device__ __forceinline__ void FromFloat(float v, __half* out) { *out = __float2half_rn(v); }

// Element offset of (block, layer, slot)'s keys; the values follow the
// block's keys of that layer (block_size * kv_dim elements later).
__device__ __forceinline__ int64_t KeyOffset(int64_t block, int64_t layer, int64_t slot,
                                             const KvCacheView& c) {
  return ((block * c.layers + layer) * 2 * c.block_size + slot) * c.kv_dim;
}

template <typename T>
__global__ void StoreKvKernel(const float* k, const float* v, RowKv meta, KvCacheView cache,
                              int64_t layer) {
  const int64_t r = blockIdx.x;
  const int32_t pos = meta.kv_pos[r];
  const int32_t block = meta.blocks[meta.table_offset[r] + pos / cache.block_size];
  T* key = static_cast<T*>(cache.data) + KeyOffset(block, layer, pos % cache.block_size, cache);
  T* value = key + static_cast<int64_t>(cache.block_size) * cache.kv_dim;
  for (int64_t d = threadIdx.x; d < cache.kv_dim; d += blockDim.x) {
    FromFloat(k[r * cache.kv_dim + d], key + d);
    FromFloat(v[r * cache.kv_dim + d], value + d);
  }
}

// One block of kWarps warps per (row, query head). Lane l holds elements
// [l * E, l * E + E) of the head (E = head_dim / 32). Warp w visits
// positions w, w + kWarps, ...: score by a warp-wide dot product, then an
// online softmax update of its running max, sum and weighted values. The
// warps' partial results are merged at the end.
template <typename T, int E>
__global__ void __launch_bounds__(kWarps * 32)
    AttentionKernel(const float* q, RowKv meta, KvCacheView cache, int64_t layer,
                    AttentionShape shape, float* out) {
  const int64_t r = blockIdx.x;
  const int32_t h = blockIdx.y;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int32_t head_dim = shape.head_dim;
  const int32_t kv_head = h / (shape.head_count / shape.head_count_kv);
  const int64_t q_cols = static_cast<int64_t>(shape.head_count) * head_dim;

  float qv[E];
  const float* qh = q + r * q_cols + static_cast<int64_t>(h) * head_dim + lane * E;
#pragma unroll
  for (int e = 0; e < E; ++e) {
    // With an fp16 cache the query is rounded to fp16 too (llama.cpp's K·Q
    // runs in fp16 x fp16).
    qv[e] = ToFloat(static_cast<T>(qh[e]));
  }

  const int32_t n_pos = meta.kv_pos[r] + 1;
  const int32_t first = shape.window > 0 ? max(0, n_pos - shape.window) : 0;
  const int32_t* table = meta.blocks + meta.table_offset[r];
  const T* base = static_cast<const T*>(cache.data);
  float m = -INFINITY, l = 0.0f, acc[E];
#pragma unroll
  for (int e = 0; e < E; ++e) acc[e] = 0.0f;

  for (int32_t j = first + warp; j < n_pos; j += kWarps) {
    const int64_t off = KeyOffset(table[j / cache.block_size], layer, j % cache.block_size, cache) +
                        static_cast<int64_t>(kv_head) * head_dim + lane * E;
    const T* key = base + off;
    const T* value = key + static_cast<int64_t>(cache.block_size) * cache.kv_dim;
    float s = 0.0f;
#pragma unroll
    for (int e = 0; e < E; ++e) s += qv[e] * ToFloat(key[e]);
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    s *= shape.scale;
    const float m_new = fmaxf(m, s);
    const float correction = expf(m - m_new);  // 0 on the first position
    const float p = expf(s - m_new);
    l = l * correction + p;
#pragma unroll
    for (int e = 0; e < E; ++e) acc[e] = acc[e] * correction + p * ToFloat(value[e]);
    m = m_new;
  }

  LLM_SHARED_ARRAY(float, s_max, kWarps);
  LLM_SHARED_ARRAY(float, s_sum, kWarps);
  LLM_SHARED_ARRAY2(float, s_acc, kWarps, 256);
  if (lane == 0) {
    s_max[warp] = m;
    s_sum[warp] = l;
  }
#pragma unroll
  for (int e = 0; e < E; ++e) s_acc[warp][lane * E + e] = acc[e];
  __syncthreads();

  float max_all = -INFINITY;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) max_all = fmaxf(max_all, s_max[w]);
  float weights[kWarps], total = 0.0f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    // A warp that saw no position has max -inf and sum 0: weight 0.
    weights[w] = s_sum[w] > 0.0f ? expf(s_max[w] - max_all) : 0.0f;
    total += weights[w] * s_sum[w];
  }
  float* o = out + r * q_cols + static_cast<int64_t>(h) * head_dim;
  for (int32_t d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float v = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) v += weights[w] * s_acc[w][d];
    o[d] = v / total;
  }
}

template <typename T>
cudaError_t LaunchAttentionTyped(const float* q, int64_t rows, const RowKv& meta,
                                 const KvCacheView& cache, int64_t layer,
                                 const AttentionShape& shape, float* out, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>(shape.head_count));
  const int threads = kWarps * 32;
  switch (shape.head_dim / 32) {
#define LLM_ATTENTION_CASE(E)                                                                      \
  case E:                                                                                          \
    LaunchKernel<AttentionKernel<T, E>>(grid, threads, stream, q, meta, cache, layer, shape, out); \
    break;
    LLM_ATTENTION_CASE(1)
    LLM_ATTENTION_CASE(2)
    LLM_ATTENTION_CASE(3)
    LLM_ATTENTION_CASE(4)
    LLM_ATTENTION_CASE(5)
    LLM_ATTENTION_CASE(6)
    LLM_ATTENTION_CASE(7)
    LLM_ATTENTION_CASE(8)
#undef LLM_ATTENTION_CASE
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace

bool AttentionSupportsHeadDim(int64_t head_dim) {
  return head_dim >= 32 && head_dim <= 256 && head_dim % 32 == 0;
}

cudaError_t LaunchStoreKv(const float* k, const float* v, int64_t rows, const RowKv& meta,
                          const KvCacheView& cache, int64_t layer, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  const unsigned grid = static_cast<unsigned>(rows);
  if (cache.f16) {
    LaunchKernel<StoreKvKernel<__half>>(grid, 256, stream, k, v, meta, cache, layer);
  } else {
    LaunchKernel<StoreKvKernel<float>>(grid, 256, stream, k, v, meta, cache, layer);
  }
  return cudaGetLastError();
}

cudaError_t LaunchAttention(const float* q, int64_t rows, const RowKv& meta,
                            const KvCacheView& cache, int64_t layer, const AttentionShape& shape,
                            float* out, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  if (!AttentionSupportsHeadDim(shape.head_dim) || shape.head_count_kv <= 0 ||
      shape.head_count % shape.head_count_kv != 0) {
    return cudaErrorInvalidValue;
  }
  return cache.f16 ? LaunchAttentionTyped<__half>(q, rows, meta, cache, layer, shape, out, stream)
                   : LaunchAttentionTyped<float>(q, rows, meta, cache, layer, shape, out, stream);
}

}  // namespace llm::cuda
