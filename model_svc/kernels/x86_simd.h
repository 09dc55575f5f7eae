// Internal to the CPU kernels: small x86 SIMD helpers written once and
// compiled into each kernel file that uses them, for that file's instruction
// set (vec_avx2.cc, vec_avx512.cc, quant_avx2.cc), as the sampler compiles one
// kernel source per ISA (sampler/kernels_impl.h). Each file runs the same
// operations in the same order, so every width gives the same bits. Include
// only from files compiled with at least -mavx2 -mfma.
//
// Everything here has internal linkage (an unnamed namespace, against the
// usual rule for headers): the files that include it are compiled for
// different instruction sets, and a shared inline copy that the linker kept
// from an AVX-512 file would run AVX-512 instructions on an AVX2 machine.
#ifndef LLM_MODEL_SVC_KERNELS_X86_SIMD_H_
#define LLM_MODEL_SVC_KERNELS_X86_SIMD_H_

#include <immintrin.h>

namespace llm::kernels::x86 {
namespace {  // NOLINT(build/namespaces): one copy per kernel file, see above

// Sum of the 8 lanes: ((v0 + v4) + (v2 + v6)) + ((v1 + v5) + (v3 + v7)),
// a fixed tree (the canonical order of quant.h).
inline float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// The float operations ExpCephes needs, on 8 lanes (ymm) and, in files
// compiled for AVX-512, on 16 (zmm): one instruction each.
struct Ymm {
  using F = __m256;
  static F Set1(float v) { return _mm256_set1_ps(v); }
  static F Add(F a, F b) { return _mm256_add_ps(a, b); }
  static F Mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F Max(F a, F b) { return _mm256_max_ps(a, b); }
  static F Fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F Fnma(F a, F b, F c) { return _mm256_fnmadd_ps(a, b, c); }
  static F RoundNearest(F v) {
    return _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  // 2^k for integral k in [-126, 127]: (k + 127) << 23 as float bits.
  static F Pow2(F k) {
    return _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23));
  }
};

#if defined(__AVX512F__)
struct Zmm {
  using F = __m512;
  static F Set1(float v) { return _mm512_set1_ps(v); }
  static F Add(F a, F b) { return _mm512_add_ps(a, b); }
  static F Mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F Max(F a, F b) { return _mm512_max_ps(a, b); }
  static F Fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F Fnma(F a, F b, F c) { return _mm512_fnmadd_ps(a, b, c); }
  static F RoundNearest(F v) {
    return _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  static F Pow2(F k) {
    return _mm512_castsi512_ps(
        _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(k), _mm512_set1_epi32(127)), 23));
  }
};
#endif

// exp(x) for x <= 0 in every lane of V (Cephes expf: x = k ln2 + r,
// |r| <= ln2/2, degree-5 polynomial for e^r; relative error < 2e-7).
// Underflows to 0 below -87. The same operations per lane at every width,
// so the same bits.
template <class V>
inline typename V::F ExpCephes(typename V::F x) {
  using F = typename V::F;
  x = V::Max(x, V::Set1(-87.3f));
  const F k = V::RoundNearest(V::Mul(x, V::Set1(1.44269504088896341f)));
  F r = V::Fnma(k, V::Set1(0.693359375f), x);
  r = V::Fnma(k, V::Set1(-2.12194440e-4f), r);
  F p = V::Set1(1.9875691500e-4f);
  p = V::Fma(p, r, V::Set1(1.3981999507e-3f));
  p = V::Fma(p, r, V::Set1(8.3334519073e-3f));
  p = V::Fma(p, r, V::Set1(4.1665795894e-2f));
  p = V::Fma(p, r, V::Set1(1.6666665459e-1f));
  p = V::Fma(p, r, V::Set1(5.0000001201e-1f));
  p = V::Fma(p, V::Mul(r, r), V::Add(r, V::Set1(1.0f)));
  return V::Mul(p, V::Pow2(k));
}

}  // namespace
}  // namespace llm::kernels::x86

#endif  // LLM_MODEL_SVC_KERNELS_X86_SIMD_H_
