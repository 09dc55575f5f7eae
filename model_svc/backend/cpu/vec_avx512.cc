// AVX-512 versions of some of vec.h. Compiled with -mavx512f and friends;
// only called after vec.cc has checked the CPU.
#include <immintrin.h>

#include "model_svc/backend/cpu/exp_libm.h"
#include "model_svc/backend/cpu/vec.h"

namespace llm::cpu::vec_internal {
namespace {

// exp of 8 floats with libm's bits: exp_libm's algorithm in eight double
// lanes, the table looked up by two two-register permutes and a blend
// instead of AVX2's gathers (the same operations otherwise, so the same bits).
inline __m256 Exp8Libm(__m256 x) {
  namespace el = exp_libm;
  const uint64_t* t = el::table().t;
  const __m512i t0 = _mm512_load_si512(t), t1 = _mm512_load_si512(t + 8);
  const __m512i t2 = _mm512_load_si512(t + 16), t3 = _mm512_load_si512(t + 24);
  const __m512d xd = _mm512_cvtps_pd(x);
  const __m512d z = _mm512_mul_pd(_mm512_set1_pd(el::kInvLn2N), xd);
  __m512d kd = _mm512_add_pd(z, _mm512_set1_pd(el::kShift));
  const __m512i ki = _mm512_castpd_si512(kd);
  kd = _mm512_sub_pd(kd, _mm512_set1_pd(el::kShift));
  const __m512d r = _mm512_fmsub_pd(_mm512_set1_pd(el::kInvLn2N), xd, kd);
  // T[k % 32]: entries 0-15 and 16-31 by the low four bits, then bit 4.
  const __m512i low = _mm512_permutex2var_epi64(t0, ki, t1);
  const __m512i high = _mm512_permutex2var_epi64(t2, ki, t3);
  __m512i scale =
      _mm512_mask_blend_epi64(_mm512_test_epi64_mask(ki, _mm512_set1_epi64(16)), low, high);
  scale = _mm512_add_epi64(scale, _mm512_slli_epi64(ki, 47));
  const __m512d poly_hi = _mm512_fmadd_pd(_mm512_set1_pd(el::kC0), r, _mm512_set1_pd(el::kC1));
  const __m512d poly_lo = _mm512_fmadd_pd(_mm512_set1_pd(el::kC2), r, _mm512_set1_pd(1.0));
  const __m512d y = _mm512_fmadd_pd(poly_hi, _mm512_mul_pd(r, r), poly_lo);
  return el::FixLargeLanes(x, _mm512_cvtpd_ps(_mm512_mul_pd(y, _mm512_castsi512_pd(scale))));
}

}  // namespace

void ExpLibmAvx512(const float* x, float* out, int64_t n) {
  exp_libm::ExpLoop(x, out, n, Exp8Libm);
}

void SiluMulAvx512(const float* gate, const float* up, float* out, int64_t n) {
  exp_libm::SiluMulLoop(gate, up, out, n, Exp8Libm);
}

}  // namespace llm::cpu::vec_internal
