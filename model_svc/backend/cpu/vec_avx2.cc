// AVX2+FMA+F16C versions of vec.h. Compiled with -mavx2 -mfma -mf16c; only
// called after vec.cc has checked the CPU.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "model_svc/backend/cpu/quant.h"
#include "model_svc/backend/cpu/vec.h"

namespace llm::cpu::vec_internal {
namespace {

inline float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

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

// exp(x) for x <= 0 (Cephes expf: x = k ln2 + r, |r| <= ln2/2, degree-5
// polynomial for e^r; relative error < 2e-7). Underflows to 0 below -87.
inline __m256 Exp(__m256 x) {
  x = _mm256_max_ps(x, _mm256_set1_ps(-87.3f));
  const __m256 k = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(k, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i e =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

}  // namespace

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

}  // namespace llm::cpu::vec_internal
