// AVX2+FMA+F16C versions of vec.h. Compiled with -mavx2 -mfma -mf16c; only
// called after vec.cc has checked the CPU.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/half.h"
#include "model_svc/kernels/exp_libm.h"
#include "model_svc/kernels/head_shapes.h"
#include "model_svc/kernels/vec.h"
#include "model_svc/kernels/x86_simd.h"

namespace llm::kernels::vec_internal {
namespace {

using x86::HorizontalSum;

inline __m256 LoadHalves(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

}  // namespace

float DotF32Avx2(const float* a, const float* b, int64_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
  }
  for (; i + 8 <= n; i += 8) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
  }
  float sum = HorizontalSum(_mm256_add_ps(acc0, acc1));
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

float DotF32F16Avx2(const float* a, const uint16_t* b, int64_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), LoadHalves(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), LoadHalves(b + i + 8), acc1);
  }
  for (; i + 8 <= n; i += 8) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), LoadHalves(b + i), acc0);
  }
  float sum = HorizontalSum(_mm256_add_ps(acc0, acc1));
  for (; i < n; ++i) sum += a[i] * HalfToFloat(b[i]);
  return sum;
}

void AxpyF32Avx2(float w, const float* b, float* out, int64_t n) {
  const __m256 vw = _mm256_set1_ps(w);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i,
                     _mm256_fmadd_ps(vw, _mm256_loadu_ps(b + i), _mm256_loadu_ps(out + i)));
  }
  for (; i < n; ++i) out[i] += w * b[i];
}

void AddF32Avx2(float* x, const float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(x + i, _mm256_add_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  }
  for (; i < n; ++i) x[i] += y[i];
}

void ScaleMulF32Avx2(const float* x, float scale, const float* w, float* out, int64_t n) {
  const __m256 s = _mm256_set1_ps(scale);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(
        out + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), s), _mm256_loadu_ps(w + i)));
  }
  for (; i < n; ++i) out[i] = x[i] * scale * w[i];
}

void RotatePairsAvx2(float* v, const float* cs, int64_t pairs) {
  int64_t i = 0;
  for (; i + 4 <= pairs; i += 4) {
    const __m256 x = _mm256_loadu_ps(v + 2 * i);          // a0 b0 a1 b1 ...
    const __m256 t = _mm256_loadu_ps(cs + 2 * i);         // c0 s0 c1 s1 ...
    __m256 xc = _mm256_mul_ps(x, _mm256_moveldup_ps(t));  // a c, b c
    __m256 ys = _mm256_mul_ps(_mm256_permute_ps(x, 0xB1), _mm256_movehdup_ps(t));  // b s, a s
    // The products stay rounded: no contraction into vfmaddsub.
    asm("" : "+x"(xc), "+x"(ys));
    _mm256_storeu_ps(v + 2 * i, _mm256_addsub_ps(xc, ys));  // a c - b s, b c + a s
  }
  for (; i < pairs; ++i) {
    const float c = cs[2 * i], s = cs[2 * i + 1];
    const float a = v[2 * i], b = v[2 * i + 1];
    float ac = a * c, bs = b * s, as = a * s, bc = b * c;
    asm("" : "+x"(ac), "+x"(bs), "+x"(as), "+x"(bc));  // rounded products, as above
    v[2 * i] = ac - bs;
    v[2 * i + 1] = as + bc;
  }
}

void AxpyF16Avx2(float w, const uint16_t* b, float* out, int64_t n) {
  const __m256 vw = _mm256_set1_ps(w);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i, _mm256_fmadd_ps(vw, LoadHalves(b + i), _mm256_loadu_ps(out + i)));
  }
  for (; i < n; ++i) out[i] += w * HalfToFloat(b[i]);
}

void F32ToF16Avx2(const float* x, uint16_t* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) out[i] = FloatToHalf(x[i]);
}

float MaxF32Avx2(const float* x, int64_t n) {
  __m256 m = _mm256_set1_ps(-INFINITY);
  __m256 nan = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    m = _mm256_max_ps(m, v);
  }
  if (_mm256_movemask_ps(nan) != 0) return NAN;
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  float result = _mm_cvtss_f32(s);
  for (; i < n; ++i) {
    if (std::isnan(x[i])) return x[i];
    result = std::max(result, x[i]);
  }
  return result;
}

namespace {

// exp(x) for x <= 0 (x86_simd.h). Underflows to 0 below -87.
inline __m256 Exp(__m256 x) { return x86::ExpCephes<x86::Ymm>(x); }

}  // namespace

int64_t FirstAboveAvx2(const float* x, int64_t n, float threshold) {
  const __m256 t = _mm256_set1_ps(threshold);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 a = _mm256_cmp_ps(_mm256_loadu_ps(x + i), t, _CMP_GT_OQ);
    const __m256 b = _mm256_cmp_ps(_mm256_loadu_ps(x + i + 8), t, _CMP_GT_OQ);
    const int mask = _mm256_movemask_ps(a) | (_mm256_movemask_ps(b) << 8);
    if (mask != 0) return i + __builtin_ctz(static_cast<unsigned>(mask));
  }
  for (; i < n; ++i) {
    if (x[i] > threshold) return i;
  }
  return n;
}

double SumExpF32Avx2(const float* x, int64_t n, float shift) {
  const __m256 s = _mm256_set1_ps(shift);
  double total = 0;
  int64_t i = 0;
  while (i + 8 <= n) {
    // Float lanes over at most 4096 elements, then into the double total.
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    const int64_t end = std::min(n, i + 4096);
    for (; i + 16 <= end; i += 16) {
      acc0 = _mm256_add_ps(acc0, Exp(_mm256_sub_ps(_mm256_loadu_ps(x + i), s)));
      acc1 = _mm256_add_ps(acc1, Exp(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), s)));
    }
    for (; i + 8 <= end; i += 8) {
      acc0 = _mm256_add_ps(acc0, Exp(_mm256_sub_ps(_mm256_loadu_ps(x + i), s)));
    }
    total += HorizontalSum(_mm256_add_ps(acc0, acc1));
  }
  for (; i < n; ++i) total += std::exp(x[i] - shift);
  return total;
}

void MaskF32Avx2(const float* x, const uint64_t* bits, float* out, int64_t n) {
  // Lane j of a group of 8 takes bit j of the group's byte.
  const __m256i lane_bits = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  const __m256 masked = _mm256_set1_ps(-INFINITY);
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    const uint64_t w = bits[i >> 6];
    if (w == ~uint64_t{0}) {
      if (out != x) std::memcpy(out + i, x + i, 64 * sizeof(float));
      continue;
    }
    for (int g = 0; g < 8; ++g) {
      const __m256i byte = _mm256_set1_epi32(static_cast<int>((w >> (8 * g)) & 0xff));
      const __m256 keep =
          _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(byte, lane_bits), lane_bits));
      _mm256_storeu_ps(out + i + 8 * g,
                       _mm256_blendv_ps(masked, _mm256_loadu_ps(x + i + 8 * g), keep));
    }
  }
  for (; i < n; ++i) out[i] = ((bits[i >> 6] >> (i & 63)) & 1) != 0 ? x[i] : -INFINITY;
}

double ExpInPlaceAvx2(float* x, int64_t n, float shift) {
  const __m256 s = _mm256_set1_ps(shift);
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 e = Exp(_mm256_sub_ps(_mm256_loadu_ps(x + i), s));
    _mm256_storeu_ps(x + i, e);
    acc = _mm256_add_ps(acc, e);
  }
  double total = HorizontalSum(acc);
  for (; i < n; ++i) {
    x[i] = std::exp(x[i] - shift);
    total += x[i];
  }
  return total;
}

namespace {

// Row loaders for the two cache element types.
inline __m256 Load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 Load8(const uint16_t* p) { return LoadHalves(p); }
inline float Load1(const float* p) { return *p; }
inline float Load1(const uint16_t* p) { return HalfToFloat(*p); }

// The per-row dot product of DotF32Avx2 / DotF32F16Avx2, inlined, with the
// length a compile-time constant when kN > 0 (the loop then unrolls and the
// query's loads can stay in registers across rows). Same operations in the
// same order, so the same bits.
template <int kN, typename T>
inline void DotRowsImpl(const float* q, const T* k, int64_t stride, int64_t rows, int64_t n,
                        float scale, float* out) {
  int64_t r = 0;
  if constexpr (kN > 0) {
    static_assert(kN % 16 == 0);
    n = kN;
    // Four rows at a time: their FMA chains interleave, so the loop is not
    // bound by one chain's latency. Each row's operations are unchanged.
    for (; r + 4 <= rows; r += 4) {
      __m256 acc0[4], acc1[4];
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) acc0[j] = acc1[j] = _mm256_setzero_ps();
#pragma GCC unroll 16
      for (int i = 0; i < kN; i += 16) {
        const __m256 q0 = _mm256_loadu_ps(q + i), q1 = _mm256_loadu_ps(q + i + 8);
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
          const T* kr = k + (r + j) * stride;
          acc0[j] = _mm256_fmadd_ps(q0, Load8(kr + i), acc0[j]);
          acc1[j] = _mm256_fmadd_ps(q1, Load8(kr + i + 8), acc1[j]);
        }
      }
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j)
        out[r + j] = HorizontalSum(_mm256_add_ps(acc0[j], acc1[j])) * scale;
    }
  }
  for (; r < rows; ++r) {
    const T* kr = k + r * stride;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
      acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), Load8(kr + i), acc0);
      acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 8), Load8(kr + i + 8), acc1);
    }
    for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), Load8(kr + i), acc0);
    float sum = HorizontalSum(_mm256_add_ps(acc0, acc1));
    for (; i < n; ++i) sum += q[i] * Load1(kr + i);
    out[r] = sum * scale;
  }
}

// AxpyF32Avx2 / AxpyF16Avx2 over the rows in order. With kN a multiple of 8
// the kN accumulators stay in registers for the whole block; each element
// still sees acc = fma(w[r], v[r], acc) row by row, so the same bits.
template <int kN, typename T>
inline void AxpyRowsImpl(const float* w, const T* v, int64_t stride, int64_t rows, int64_t n,
                         float* acc) {
  if constexpr (kN > 0) {
    static_assert(kN % 8 == 0);
    __m256 a[kN / 8];
#pragma GCC unroll 16
    for (int j = 0; j < kN / 8; ++j) a[j] = _mm256_loadu_ps(acc + 8 * j);
    for (int64_t r = 0; r < rows; ++r) {
      const __m256 vw = _mm256_set1_ps(w[r]);
      const T* vr = v + r * stride;
#pragma GCC unroll 16
      for (int j = 0; j < kN / 8; ++j) a[j] = _mm256_fmadd_ps(vw, Load8(vr + 8 * j), a[j]);
    }
#pragma GCC unroll 16
    for (int j = 0; j < kN / 8; ++j) _mm256_storeu_ps(acc + 8 * j, a[j]);
  } else {
    for (int64_t r = 0; r < rows; ++r) {
      const __m256 vw = _mm256_set1_ps(w[r]);
      const T* vr = v + r * stride;
      int64_t i = 0;
      for (; i + 8 <= n; i += 8) {
        _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(vw, Load8(vr + i), _mm256_loadu_ps(acc + i)));
      }
      for (; i < n; ++i) acc[i] += w[r] * Load1(vr + i);
    }
  }
}

template <typename T>
void DotRowsDispatch(const float* q, const T* k, int64_t stride, int64_t rows, int64_t n,
                     float scale, float* out) {
  switch (n) {
    case 64:
      return DotRowsImpl<64>(q, k, stride, rows, n, scale, out);
    case 128:
      return DotRowsImpl<128>(q, k, stride, rows, n, scale, out);
    default:
      return DotRowsImpl<0>(q, k, stride, rows, n, scale, out);
  }
}

template <typename T>
void AxpyRowsDispatch(const float* w, const T* v, int64_t stride, int64_t rows, int64_t n,
                      float* acc) {
  switch (n) {
    case 64:
      return AxpyRowsImpl<64>(w, v, stride, rows, n, acc);
    case 128:
      return AxpyRowsImpl<128>(w, v, stride, rows, n, acc);
    default:
      return AxpyRowsImpl<0>(w, v, stride, rows, n, acc);
  }
}

// DotRowsImpl<kN> for G heads over the same rows: each row's 16-element
// chunks are loaded (converted) once and multiplied into every head's two
// chains. Two rows at a time when the 4G accumulators, the rows' chunks and
// the query's fit AVX2's 16 registers (G = 2), else one (spilling
// accumulators made 3 heads slower than one by one). Per head and row, the
// operations of DotRowsImpl in its order.
template <int kN, int G, typename T>
inline void DotRowsHeadsImpl(const float* const* q, const T* k, int64_t stride, int64_t rows,
                             float scale, float* const* out) {
  static_assert(kN % 16 == 0 && G >= 1 && G <= kMaxRowHeads);
  constexpr int R = G <= 2 ? 2 : 1;
  auto block = [&]<int kRows>(int64_t r) {
    __m256 acc0[kRows][G], acc1[kRows][G];
#pragma GCC unroll 8
    for (int j = 0; j < kRows; ++j) {
#pragma GCC unroll 4
      for (int h = 0; h < G; ++h) acc0[j][h] = acc1[j][h] = _mm256_setzero_ps();
    }
#pragma GCC unroll 16
    for (int i = 0; i < kN; i += 16) {
      __m256 k0[kRows], k1[kRows];
#pragma GCC unroll 8
      for (int j = 0; j < kRows; ++j) {
        k0[j] = Load8(k + (r + j) * stride + i);
        k1[j] = Load8(k + (r + j) * stride + i + 8);
      }
#pragma GCC unroll 4
      for (int h = 0; h < G; ++h) {
        const __m256 q0 = _mm256_loadu_ps(q[h] + i), q1 = _mm256_loadu_ps(q[h] + i + 8);
#pragma GCC unroll 8
        for (int j = 0; j < kRows; ++j) {
          acc0[j][h] = _mm256_fmadd_ps(q0, k0[j], acc0[j][h]);
          acc1[j][h] = _mm256_fmadd_ps(q1, k1[j], acc1[j][h]);
        }
      }
    }
#pragma GCC unroll 8
    for (int j = 0; j < kRows; ++j) {
#pragma GCC unroll 4
      for (int h = 0; h < G; ++h) {
        out[h][r + j] = HorizontalSum(_mm256_add_ps(acc0[j][h], acc1[j][h])) * scale;
      }
    }
  };
  int64_t r = 0;
  for (; r + R <= rows; r += R) block.template operator()<R>(r);
  for (; r < rows; ++r) block.template operator()<1>(r);
}

// AxpyRowsImpl<kN> for G heads: the kN elements in slices of S whose G * S /
// 8 accumulators stay in registers over all rows, beside the slice of the
// row and the broadcast weight (16 AVX2 registers); each slice of a row is
// loaded (converted) once for every head. Per element, the fmas of
// AxpyRowsImpl in row order.
template <int kN, int G, typename T>
inline void AxpyRowsHeadsImpl(const float* const* w, const T* v, int64_t stride, int64_t rows,
                              float* const* acc) {
  constexpr int S = G <= 2 ? 32 : 16;
  static_assert(kN % S == 0 && G >= 1 && G <= kMaxRowHeads);
  for (int s0 = 0; s0 < kN; s0 += S) {
    __m256 a[G][S / 8];
#pragma GCC unroll 4
    for (int h = 0; h < G; ++h) {
#pragma GCC unroll 4
      for (int j = 0; j < S / 8; ++j) a[h][j] = _mm256_loadu_ps(acc[h] + s0 + 8 * j);
    }
    for (int64_t r = 0; r < rows; ++r) {
      const T* vr = v + r * stride + s0;
      __m256 x[S / 8];
#pragma GCC unroll 4
      for (int j = 0; j < S / 8; ++j) x[j] = Load8(vr + 8 * j);
#pragma GCC unroll 4
      for (int h = 0; h < G; ++h) {
        const __m256 vw = _mm256_set1_ps(w[h][r]);
#pragma GCC unroll 4
        for (int j = 0; j < S / 8; ++j) a[h][j] = _mm256_fmadd_ps(vw, x[j], a[h][j]);
      }
    }
#pragma GCC unroll 4
    for (int h = 0; h < G; ++h) {
#pragma GCC unroll 4
      for (int j = 0; j < S / 8; ++j) _mm256_storeu_ps(acc[h] + s0 + 8 * j, a[h][j]);
    }
  }
}

template <typename T>
void DotRowsHeadsDispatch(const float* const* q, int g, const T* k, int64_t stride, int64_t rows,
                          int64_t n, float scale, float* const* out) {
  if (WithHeadShape<2>(n, g, [&]<int kN, int G>() {
        DotRowsHeadsImpl<kN, G>(q, k, stride, rows, scale, out);
      })) {
    return;
  }
  for (int h = 0; h < g; ++h) DotRowsDispatch(q[h], k, stride, rows, n, scale, out[h]);
}

template <typename T>
void AxpyRowsHeadsDispatch(const float* const* w, int g, const T* v, int64_t stride, int64_t rows,
                           int64_t n, float* const* acc) {
  if (WithHeadShape<2>(
          n, g, [&]<int kN, int G>() { AxpyRowsHeadsImpl<kN, G>(w, v, stride, rows, acc); })) {
    return;
  }
  for (int h = 0; h < g; ++h) AxpyRowsDispatch(w[h], v, stride, rows, n, acc[h]);
}

}  // namespace

void DotRowsHeadsAvx2(const float* const* q, int g, const uint16_t* k, int64_t stride, int64_t rows,
                      int64_t n, float scale, float* const* out) {
  DotRowsHeadsDispatch(q, g, k, stride, rows, n, scale, out);
}
void DotRowsHeadsAvx2(const float* const* q, int g, const float* k, int64_t stride, int64_t rows,
                      int64_t n, float scale, float* const* out) {
  DotRowsHeadsDispatch(q, g, k, stride, rows, n, scale, out);
}
void AxpyRowsHeadsAvx2(const float* const* w, int g, const uint16_t* v, int64_t stride,
                       int64_t rows, int64_t n, float* const* acc) {
  AxpyRowsHeadsDispatch(w, g, v, stride, rows, n, acc);
}
void AxpyRowsHeadsAvx2(const float* const* w, int g, const float* v, int64_t stride, int64_t rows,
                       int64_t n, float* const* acc) {
  AxpyRowsHeadsDispatch(w, g, v, stride, rows, n, acc);
}

void DotRowsAvx2(const float* q, const uint16_t* k, int64_t stride, int64_t rows, int64_t n,
                 float scale, float* out) {
  DotRowsDispatch(q, k, stride, rows, n, scale, out);
}
void DotRowsAvx2(const float* q, const float* k, int64_t stride, int64_t rows, int64_t n,
                 float scale, float* out) {
  DotRowsDispatch(q, k, stride, rows, n, scale, out);
}
void AxpyRowsAvx2(const float* w, const uint16_t* v, int64_t stride, int64_t rows, int64_t n,
                  float* acc) {
  AxpyRowsDispatch(w, v, stride, rows, n, acc);
}
void AxpyRowsAvx2(const float* w, const float* v, int64_t stride, int64_t rows, int64_t n,
                  float* acc) {
  AxpyRowsDispatch(w, v, stride, rows, n, acc);
}

namespace {

// Four lanes of exp_libm's algorithm in double (the table by a gather).
inline __m256d ExpLibmLanes(__m128 x) {
  namespace el = exp_libm;
  const __m256d xd = _mm256_cvtps_pd(x);
  const __m256d z = _mm256_mul_pd(_mm256_set1_pd(el::kInvLn2N), xd);
  __m256d kd = _mm256_add_pd(z, _mm256_set1_pd(el::kShift));
  const __m256i ki = _mm256_castpd_si256(kd);
  kd = _mm256_sub_pd(kd, _mm256_set1_pd(el::kShift));
  const __m256d r = _mm256_fmsub_pd(_mm256_set1_pd(el::kInvLn2N), xd, kd);
  const __m256i index = _mm256_and_si256(ki, _mm256_set1_epi64x(31));
  __m256i t = _mm256_i64gather_epi64(reinterpret_cast<const long long*>(el::table().t), index, 8);
  t = _mm256_add_epi64(t, _mm256_slli_epi64(ki, 47));
  const __m256d poly_hi = _mm256_fmadd_pd(_mm256_set1_pd(el::kC0), r, _mm256_set1_pd(el::kC1));
  const __m256d poly_lo = _mm256_fmadd_pd(_mm256_set1_pd(el::kC2), r, _mm256_set1_pd(1.0));
  const __m256d y = _mm256_fmadd_pd(poly_hi, _mm256_mul_pd(r, r), poly_lo);
  return _mm256_mul_pd(y, _mm256_castsi256_pd(t));
}

// exp of 8 floats with libm's bits.
inline __m256 Exp8Libm(__m256 x) {
  const __m128 lo = _mm256_cvtpd_ps(ExpLibmLanes(_mm256_castps256_ps128(x)));
  const __m128 hi = _mm256_cvtpd_ps(ExpLibmLanes(_mm256_extractf128_ps(x, 1)));
  return exp_libm::FixLargeLanes(x, _mm256_set_m128(hi, lo));
}

}  // namespace

void ExpLibmAvx2(const float* x, float* out, int64_t n) { exp_libm::ExpLoop(x, out, n, Exp8Libm); }

void SiluMulAvx2(const float* gate, const float* up, float* out, int64_t n) {
  exp_libm::SiluMulLoop(gate, up, out, n, Exp8Libm);
}

void RoundThroughF16Avx2(const float* x, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(x + i),
                                                              _MM_FROUND_TO_NEAREST_INT)));
  }
  for (; i < n; ++i) out[i] = HalfToFloat(FloatToHalf(x[i]));
}

}  // namespace llm::kernels::vec_internal
