// The instruction mixes of matmul_bench's BM_IssueMix. Compiled with
// -mavx512f -mavx512vnni; call only on a CPU that has them.
#include <immintrin.h>

#include <cstdint>

namespace llm::kernels {
namespace {

enum IssueMix { kDpOnly, kDpFma, kDpMul, kDpAdd, kDpCvt };

// One instruction of each chain; the chains are named variables (an array
// would live in memory).
#define LLM_ISSUE_STEP(i)                                                             \
  a##i = _mm512_dpbusd_epi32(a##i, b, c);                                             \
  if constexpr (kMix == kDpFma) f##i = _mm512_fmadd_ps(f##i, x, y);                   \
  if constexpr (kMix == kDpMul) f##i = _mm512_mul_ps(f##i, x);                        \
  if constexpr (kMix == kDpAdd) f##i = _mm512_add_ps(f##i, x);                        \
  if constexpr (kMix == kDpCvt) f##i = _mm512_cvtepi32_ps(_mm512_castps_si512(f##i)); \
  asm volatile("" : "+v"(a##i), "+v"(f##i)) /* keeps the chain in a register, and alive */

template <int kMix>
void Rounds(int64_t rounds) {
  __m512i a0 = _mm512_set1_epi32(0), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
  __m512 f0 = _mm512_set1_ps(1.0f), f1 = f0, f2 = f0, f3 = f0, f4 = f0, f5 = f0, f6 = f0, f7 = f0;
  const __m512i b = _mm512_set1_epi32(3), c = _mm512_set1_epi32(5);
  // Opaque values, so that no operation folds away (x * 1.0f would).
  volatile float xv = 1.0001f, yv = 0.5f;
  const __m512 x = _mm512_set1_ps(xv), y = _mm512_set1_ps(yv);
  for (int64_t r = 0; r < rounds; ++r) {
    LLM_ISSUE_STEP(0);
    LLM_ISSUE_STEP(1);
    LLM_ISSUE_STEP(2);
    LLM_ISSUE_STEP(3);
    LLM_ISSUE_STEP(4);
    LLM_ISSUE_STEP(5);
    LLM_ISSUE_STEP(6);
    LLM_ISSUE_STEP(7);
  }
}
#undef LLM_ISSUE_STEP

}  // namespace

void IssueRoundsAvx512(int mix, int64_t rounds) {
  switch (mix) {
    case kDpFma:
      return Rounds<kDpFma>(rounds);
    case kDpMul:
      return Rounds<kDpMul>(rounds);
    case kDpAdd:
      return Rounds<kDpAdd>(rounds);
    case kDpCvt:
      return Rounds<kDpCvt>(rounds);
    default:
      return Rounds<kDpOnly>(rounds);
  }
}

}  // namespace llm::kernels
