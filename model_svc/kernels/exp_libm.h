// Internal to the CPU vector kernels: glibc's expf evaluated in SIMD lanes
// with libm's bits, shared by vec_avx2.cc (four double lanes at a time, a
// gather for the table) and vec_avx512.cc (eight, two permutes). Include only
// from files compiled for AVX2 or more.
//
// glibc's expf (the algorithm of ARM's optimized-routines) computes, in
// double,
//   z = x * 32/ln2,  k = round(z),  r = z - k (one fma),
//   2^(k/32) = bits(T[k % 32] + (k << 47)),  T[i] = bits(2^(i/32)) - (i << 47),
//   exp(x) = 2^(k/32) * ((C0 * r + C1) * r^2 + (C2 * r + 1))
// and rounds the product to float. The same operations in the lanes give the
// same float for every |x| < 88 (checked against std::exp on all 2^31 such
// floats); other lanes (overflow, underflow, NaN) go to std::exp.
//
// Everything here has internal linkage (an unnamed namespace, against the
// usual rule for headers): the files that include it are compiled for
// different instruction sets, and a shared inline copy that the linker kept
// from the AVX-512 file would run AVX-512 instructions on an AVX2 machine.
#ifndef LLM_MODEL_SVC_KERNELS_EXP_LIBM_H_
#define LLM_MODEL_SVC_KERNELS_EXP_LIBM_H_

#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>

namespace llm::kernels::vec_internal::exp_libm {
namespace {

inline constexpr double kInvLn2N = 0x1.71547652b82fep+0 * 32;
inline constexpr double kShift = 0x1.8p+52;  // adding it rounds to an integer in the low bits
inline constexpr double kC0 = 0x1.c6af84b912394p-5 / (32.0 * 32.0 * 32.0);
inline constexpr double kC1 = 0x1.ebfce50fac4f3p-3 / (32.0 * 32.0);
inline constexpr double kC2 = 0x1.62e42ff0c52d6p-1 / 32.0;

// T[i] of the algorithm, 64-byte aligned (four zmm registers).
struct Table {
  alignas(64) uint64_t t[32];
  Table() {
    for (int i = 0; i < 32; ++i) {
      const double v = static_cast<double>(std::exp2(static_cast<long double>(i) / 32));
      uint64_t bits;
      std::memcpy(&bits, &v, sizeof(bits));
      t[i] = bits - (static_cast<uint64_t>(i) << 47);
    }
  }
};
inline const Table& table() {
  static const Table t;
  return t;
}

// y = the lanes' exp(x); lanes where |x| >= 88 or x is NaN are recomputed
// with std::exp (the double lanes do not handle overflow and underflow).
inline __m256 FixLargeLanes(__m256 x, __m256 y) {
  const __m256 big =
      _mm256_cmp_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), x), _mm256_set1_ps(88.0f), _CMP_NLT_UQ);
  const int rare = _mm256_movemask_ps(big);
  if (rare == 0) return y;
  alignas(32) float xs[8], ys[8];
  _mm256_store_ps(xs, x);
  _mm256_store_ps(ys, y);
  for (int i = 0; i < 8; ++i) {
    if (rare & (1 << i)) ys[i] = std::exp(xs[i]);
  }
  return _mm256_load_ps(ys);
}

// out[i] = exp(x[i]), with exp8 (8 lanes, libm's bits).
template <typename Exp8>
inline void ExpLoop(const float* x, float* out, int64_t n, Exp8 exp8) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, exp8(_mm256_loadu_ps(x + i)));
  for (; i < n; ++i) out[i] = std::exp(x[i]);
}

// out[i] = gate[i] / (1 + exp(-gate[i])) * up[i]: the scalar loop's
// operations, in its order, with exp8 for the exponential.
template <typename Exp8>
inline void SiluMulLoop(const float* gate, const float* up, float* out, int64_t n, Exp8 exp8) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), g));
    const __m256 silu = _mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(silu, _mm256_loadu_ps(up + i)));
  }
  for (; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

}  // namespace
}  // namespace llm::kernels::vec_internal::exp_libm

#endif  // LLM_MODEL_SVC_KERNELS_EXP_LIBM_H_
