// Bodies of the kernels declared in kernels.h, written once over GCC vector
// types and instantiated per ISA: kernels_generic.cc uses 4-wide vectors,
// kernels_avx2.cc 8-wide ones. Include only from those two files: everything
// here has internal linkage, so each file gets its own copy compiled for its
// own instruction set.
//
// Bit-identical results across widths: every kernel walks the input in steps
// of kStep = 32 elements. Element e of a step always feeds "logical lane" e
// (vector e / width, lane e % width); lanes are accumulated separately and
// combined in a fixed order that does not depend on the width. No FMA is used
// (the files are compiled with -ffp-contract=off), so every rounding is the
// same in both builds.
#ifndef LLM_SAMPLER_KERNELS_IMPL_H_
#define LLM_SAMPLER_KERNELS_IMPL_H_

#include <cstdint>
#include <cstring>
#include <limits>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include "sampler/kernels.h"

namespace llm::sampler::internal {
namespace {

using F4 = float __attribute__((vector_size(16)));
using I4 = int32_t __attribute__((vector_size(16)));
using U4 = uint32_t __attribute__((vector_size(16)));
#if defined(__AVX2__)
using F8 = float __attribute__((vector_size(32)));
using I8 = int32_t __attribute__((vector_size(32)));
using U8 = uint32_t __attribute__((vector_size(32)));
#endif

// Masks (the result of comparisons) are signed; bit arithmetic that may wrap
// is done unsigned.
template <typename F>
struct IntVector;
template <>
struct IntVector<F4> {
  using Type = I4;
  using Unsigned = U4;
};
#if defined(__AVX2__)
template <>
struct IntVector<F8> {
  using Type = I8;
  using Unsigned = U8;
};
#endif

// Hot helpers and per-step lambdas must be inlined into their loops.
#define LLM_SAMPLER_INLINE __attribute__((always_inline))

constexpr int kStep = 32;   // elements (logical lanes) per step
constexpr int kFlush = 16;  // steps between flushes of float lane sums into doubles
constexpr float kInf = std::numeric_limits<float>::infinity();

// 2^f on [-0.5, 0.5]: degree-6 polynomial interpolating at Chebyshev nodes
// (relative error 1.7e-7 evaluated in float as below); c0 = 1, so 2^0 is
// exactly 1.
constexpr float kC0 = 1.0f;
constexpr float kC1 = 0.693147182f;
constexpr float kC2 = 0.240226507f;
constexpr float kC3 = 0.0555032715f;
constexpr float kC4 = 0.00961805694f;
constexpr float kC5 = 0.0013400428f;
constexpr float kC6 = 0.000154614449f;
// 1.5 * 2^23: adding it rounds a float of magnitude < 2^22 to an integer.
constexpr float kRoundMagic = 12582912.0f;
constexpr uint32_t kRoundMagicBits = 0x4B400000;

template <typename F>
struct Simd {
  using I = typename IntVector<F>::Type;
  using U = typename IntVector<F>::Unsigned;
  static constexpr int kWidth = static_cast<int>(sizeof(F) / sizeof(float));
  static constexpr int kVecs = kStep / kWidth;  // vectors per step
  static constexpr int kPerRow = 8 / kWidth;    // vectors per row of 8 lanes

  LLM_SAMPLER_INLINE static F Load(const float* p) {
    F v;
    std::memcpy(&v, p, sizeof(v));
    return v;
  }
  static void Store(float* p, F v) { std::memcpy(p, &v, sizeof(v)); }
  static F Splat(float x) { return F{} + x; }
  // v where mask is set, +0 elsewhere.
  static F Select(I mask, F v) { return reinterpret_cast<F>(reinterpret_cast<I>(v) & mask); }
  LLM_SAMPLER_INLINE static bool Any(I mask) {
#if defined(__AVX2__)
    if constexpr (kWidth == 8) return _mm256_movemask_ps(reinterpret_cast<__m256>(mask)) != 0;
#endif
#if defined(__SSE2__)
    if constexpr (kWidth == 4) return _mm_movemask_ps(reinterpret_cast<__m128>(mask)) != 0;
#endif
    int32_t any = 0;
    for (int l = 0; l < kWidth; ++l) any |= mask[l];
    return any != 0;
  }

  // 2^z; exactly 0 where z < -125, z = -inf or z is NaN. Valid for z <= 127.
  // The polynomial is evaluated in Estrin's form (short dependency chains).
  LLM_SAMPLER_INLINE static F Exp2(F z) {
    const F t = z + kRoundMagic;
    const F n = t - kRoundMagic;  // z rounded to the nearest integer
    const F f = z - n;            // exact, in [-0.5, 0.5]
    const F f2 = f * f;
    const F f4 = f2 * f2;
    const F a = kC1 * f + kC0;
    const F b = kC3 * f + kC2;
    const F c = (kC5 * f + kC4) + kC6 * f2;
    const F y = (a + f2 * b) + f4 * c;
    const U exponent = (reinterpret_cast<U>(t) - kRoundMagicBits) << 23;
    const U bits = reinterpret_cast<U>(y) + exponent;
    const I keep = z >= -125.0f;
    return reinterpret_cast<F>(bits & reinterpret_cast<U>(keep));
  }

  // Sum of the 32 lanes of one step: rows of 8 lanes added pairwise
  // ((r0 + r1) + (r2 + r3)) per lane, then the 8 lanes as a balanced tree.
  LLM_SAMPLER_INLINE static float StepSum(const F (&v)[kVecs]) {
    float lanes[8];
    for (int g = 0; g < kPerRow; ++g) {
      const F r = (v[g] + v[kPerRow + g]) + (v[2 * kPerRow + g] + v[3 * kPerRow + g]);
      Store(lanes + g * kWidth, r);
    }
    return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
           ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
  }

  // Copies the last n % kStep elements into a step-sized buffer padded with `fill`.
  static void PadTail(const float* src, int64_t count, float fill, float (&buf)[kStep]) {
    for (int e = 0; e < kStep; ++e) buf[e] = e < count ? src[e] : fill;
  }
};

template <typename F>
MaxScan ScanMaxImpl(const float* x, int64_t n) {
  using S = Simd<F>;
  using I = typename S::I;
  constexpr int W = S::kWidth;
  F mx[S::kVecs];
  for (F& m : mx) m = S::Splat(-kInf);
  I bad = {};
  const int32_t kExpBits = 0x7f800000;
  int64_t i = 0;
  for (; i + kStep <= n; i += kStep) {
    for (int j = 0; j < S::kVecs; ++j) {
      const F v = S::Load(x + i + j * W);
      mx[j] = v > mx[j] ? v : mx[j];
      bad |= (reinterpret_cast<I>(v) & kExpBits) == kExpBits;
    }
  }
  float best = -kInf;
  for (int j = 0; j < S::kVecs; ++j) {
    for (int l = 0; l < W; ++l) best = mx[j][l] > best ? mx[j][l] : best;
  }
  bool finite = !S::Any(bad);
  for (; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, x + i, sizeof(bits));
    if ((bits & 0x7f800000u) == 0x7f800000u) finite = false;
    best = x[i] > best ? x[i] : best;
  }
  return {best, finite};
}

template <typename F, bool kStore>
double ExpSumLoop(const float* x, int64_t n, float shift, float scale, float* out) {
  using S = Simd<F>;
  constexpr int W = S::kWidth;
  F acc[S::kVecs] = {};
  double lanes[kStep] = {};
  int pending = 0;
  auto flush = [&]() LLM_SAMPLER_INLINE {
    float tmp[kStep];
    for (int j = 0; j < S::kVecs; ++j) {
      S::Store(tmp + j * W, acc[j]);
      acc[j] = F{};
    }
    for (int e = 0; e < kStep; ++e) lanes[e] += tmp[e];
    pending = 0;
  };
  auto step = [&](const float* src, float* dst) LLM_SAMPLER_INLINE {
    for (int j = 0; j < S::kVecs; ++j) {
      const F e = S::Exp2((S::Load(src + j * W) - shift) * scale);
      if constexpr (kStore) S::Store(dst + j * W, e);
      acc[j] += e;
    }
    if (++pending == kFlush) flush();
  };
  int64_t i = 0;
  for (; i + kStep <= n; i += kStep) step(x + i, kStore ? out + i : nullptr);
  if (i < n) {
    float buf[kStep];
    float res[kStep];
    S::PadTail(x + i, n - i, -kInf, buf);  // exp(-inf) = 0 adds nothing
    step(buf, res);
    if constexpr (kStore) std::memcpy(out + i, res, sizeof(float) * (n - i));
  }
  flush();
  double total = 0.0;
  for (int e = 0; e < kStep; ++e) total += lanes[e];
  return total;
}

template <typename F>
double ExpSumImpl(const float* x, int64_t n, float shift, float scale, float* out) {
  return out != nullptr ? ExpSumLoop<F, true>(x, n, shift, scale, out)
                        : ExpSumLoop<F, false>(x, n, shift, scale, nullptr);
}

template <typename F>
int64_t FindFirstGeImpl(const float* x, int64_t begin, int64_t n, float threshold) {
  using S = Simd<F>;
  using I = typename S::I;
  constexpr int W = S::kWidth;
  const F t = S::Splat(threshold);
  int64_t i = begin;
  for (; i + kStep <= n; i += kStep) {
    I any = {};
    for (int j = 0; j < S::kVecs; ++j) any |= S::Load(x + i + j * W) >= t;
    if (S::Any(any)) {
      for (int e = 0; e < kStep; ++e) {
        if (x[i + e] >= threshold) return i + e;
      }
    }
  }
  for (; i < n; ++i) {
    if (x[i] >= threshold) return i;
  }
  return n;
}

template <typename F, int kT>
void MassAtOrAboveLoop(const float* p, int64_t n, const float* thresholds, int count,
                       double* mass) {
  using S = Simd<F>;
  constexpr int W = S::kWidth;
  constexpr int R = S::kPerRow;
  F t[kT];
  for (int c = 0; c < kT; ++c) t[c] = S::Splat(c < count ? thresholds[c] : kInf);
  F acc[kT][R] = {};
  double lanes[kT][8] = {};
  int pending = 0;
  auto flush = [&]() LLM_SAMPLER_INLINE {
    for (int c = 0; c < kT; ++c) {
      float tmp[8];
      for (int g = 0; g < R; ++g) {
        S::Store(tmp + g * W, acc[c][g]);
        acc[c][g] = F{};
      }
      for (int l = 0; l < 8; ++l) lanes[c][l] += tmp[l];
    }
    pending = 0;
  };
  auto step = [&](const float* src) LLM_SAMPLER_INLINE {
    F v[S::kVecs];
    for (int j = 0; j < S::kVecs; ++j) v[j] = S::Load(src + j * W);
    for (int c = 0; c < kT; ++c) {
      for (int g = 0; g < R; ++g) {
        acc[c][g] += (S::Select(v[g] >= t[c], v[g]) + S::Select(v[R + g] >= t[c], v[R + g])) +
                     (S::Select(v[2 * R + g] >= t[c], v[2 * R + g]) +
                      S::Select(v[3 * R + g] >= t[c], v[3 * R + g]));
      }
    }
    if (++pending == kFlush) flush();
  };
  int64_t i = 0;
  for (; i + kStep <= n; i += kStep) step(p + i);
  if (i < n) {
    float buf[kStep];
    S::PadTail(p + i, n - i, -1.0f, buf);  // below every threshold (they are >= 0)
    step(buf);
  }
  flush();
  for (int c = 0; c < count; ++c) {
    double total = 0.0;
    for (int l = 0; l < 8; ++l) total += lanes[c][l];
    mass[c] = total;
  }
}

template <typename F>
void MassAtOrAboveImpl(const float* p, int64_t n, const float* thresholds, int count,
                       double* mass) {
  static_assert(kMaxThresholds == 8);
  if (count <= 4) {
    MassAtOrAboveLoop<F, 4>(p, n, thresholds, count, mass);
  } else {
    MassAtOrAboveLoop<F, 8>(p, n, thresholds, count, mass);
  }
}

#if defined(__AVX2__)
// For left-packing 8 lanes: kPack[mask] lists the set lanes of mask first.
struct PackTable {
  int32_t lanes[256][8];
};
constexpr PackTable MakePackTable() {
  PackTable t{};
  for (int mask = 0; mask < 256; ++mask) {
    int k = 0;
    for (int l = 0; l < 8; ++l) {
      if (mask & (1 << l)) t.lanes[mask][k++] = l;
    }
    for (; k < 8; ++k) t.lanes[mask][k] = 0;
  }
  return t;
}
constexpr PackTable kPack = MakePackTable();
#endif

// Appends (base + e, src[e]) for the lanes e of one step whose bit is set in
// `in`; returns how many. out_idx and out_val need room for kStep + 8 more.
template <typename F>
LLM_SAMPLER_INLINE inline int PackStep(const float* src,
                                       const typename Simd<F>::I (&in)[Simd<F>::kVecs],
                                       int64_t base, int32_t* out_idx, float* out_val) {
  using S = Simd<F>;
  constexpr int W = S::kWidth;
  int k = 0;
#if defined(__AVX2__)
  if constexpr (W == 8) {
    const __m256i lane_ids = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (int j = 0; j < S::kVecs; ++j) {
      // Unconditional (no branch to mispredict): an empty mask stores
      // garbage that the next store or the caller's count ignores.
      const int mask = _mm256_movemask_ps(reinterpret_cast<__m256>(in[j]));
      const __m256i perm = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kPack.lanes[mask]));
      const __m256 v = _mm256_loadu_ps(src + j * W);
      const __m256i idx =
          _mm256_add_epi32(lane_ids, _mm256_set1_epi32(static_cast<int32_t>(base + j * W)));
      _mm256_storeu_ps(out_val + k, _mm256_permutevar8x32_ps(v, perm));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out_idx + k),
                          _mm256_permutevar8x32_epi32(idx, perm));
      k += __builtin_popcount(static_cast<unsigned>(mask));
    }
    return k;
  }
#endif
  for (int j = 0; j < S::kVecs; ++j) {
    for (int l = 0; l < W; ++l) {
      const int e = j * W + l;
      out_idx[k] = static_cast<int32_t>(base + e);
      out_val[k] = src[e];
      k += in[j][l] != 0 ? 1 : 0;
    }
  }
  return k;
}

template <typename F>
int64_t CollectBandImpl(const float* p, int64_t n, float lo, float hi, int32_t* out_idx,
                        float* out_val) {
  using S = Simd<F>;
  using I = typename S::I;
  constexpr int W = S::kWidth;
  const F vlo = S::Splat(lo);
  const F vhi = S::Splat(hi);
  int64_t found = 0;
  // The packers write whole vectors: stage the last steps through a buffer so
  // that nothing lands beyond out[n - 1].
  int32_t stage_idx[kStep + 8];
  float stage_val[kStep + 8];
  auto step = [&](const float* src, int64_t base) LLM_SAMPLER_INLINE {
    I in[S::kVecs];
    I any = {};
    for (int j = 0; j < S::kVecs; ++j) {
      const F v = S::Load(src + j * W);
      in[j] = (v >= vlo) & (v < vhi);
      any |= in[j];
    }
    if (!S::Any(any)) return;
    if (found + kStep + 8 <= n) {
      found += PackStep<F>(src, in, base, out_idx + found, out_val + found);
    } else {
      const int k = PackStep<F>(src, in, base, stage_idx, stage_val);
      std::memcpy(out_idx + found, stage_idx, sizeof(int32_t) * k);
      std::memcpy(out_val + found, stage_val, sizeof(float) * k);
      found += k;
    }
  };
  int64_t i = 0;
  for (; i + kStep <= n; i += kStep) step(p + i, i);
  if (i < n) {
    float buf[kStep];
    S::PadTail(p + i, n - i, -1.0f, buf);  // lo >= 0: padding is never in the band
    step(buf, i);
  }
  return found;
}

template <typename F>
MassCount SelectedMassImpl(const float* p, int64_t n, float tau, bool inclusive) {
  using S = Simd<F>;
  using I = typename S::I;
  constexpr int W = S::kWidth;
  const F t = S::Splat(tau);
  double total = 0.0;
  I counts = {};
  auto step = [&](const float* src) LLM_SAMPLER_INLINE {
    F sel[S::kVecs];
    for (int j = 0; j < S::kVecs; ++j) {
      const F v = S::Load(src + j * W);
      const I mask = inclusive ? (v >= t) : (v > t);
      sel[j] = S::Select(mask, v);
      counts -= mask;
    }
    total += S::StepSum(sel);
  };
  int64_t i = 0;
  for (; i + kStep <= n; i += kStep) step(p + i);
  if (i < n) {
    float buf[kStep];
    S::PadTail(p + i, n - i, -1.0f, buf);  // tau >= 0: never selected
    step(buf);
  }
  int64_t count = 0;
  for (int l = 0; l < W; ++l) count += counts[l];
  return {total, count};
}

template <typename F>
int64_t DrawImpl(const float* p, int64_t n, float tau, bool inclusive, double target) {
  using S = Simd<F>;
  constexpr int W = S::kWidth;
  const F t = S::Splat(tau);
  double cum = 0.0;
  // Returns the chosen offset within the step, or -1 to go on.
  auto step = [&](const float* src) LLM_SAMPLER_INLINE -> int {
    F sel[S::kVecs];
    for (int j = 0; j < S::kVecs; ++j) {
      const F v = S::Load(src + j * W);
      sel[j] = S::Select(inclusive ? (v >= t) : (v > t), v);
    }
    const float sum = S::StepSum(sel);
    if (cum + sum <= target) {
      cum += sum;
      return -1;
    }
    // The target falls in this step (sum > 0, so some element is selected).
    double run = cum;
    int last = -1;
    for (int e = 0; e < kStep; ++e) {
      const float v = src[e];
      if (!(inclusive ? v >= tau : v > tau) || !(v > 0.0f)) continue;
      last = e;
      run += v;
      if (run > target) return e;
    }
    return last;
  };
  int64_t i = 0;
  for (; i + kStep <= n; i += kStep) {
    const int e = step(p + i);
    if (e >= 0) return i + e;
  }
  if (i < n) {
    float buf[kStep];
    S::PadTail(p + i, n - i, -1.0f, buf);
    const int e = step(buf);
    if (e >= 0) return i + e;
  }
  return -1;
}

template <typename F>
constexpr Kernels MakeKernels(const char* name) {
  return Kernels{name,
                 &ScanMaxImpl<F>,
                 &ExpSumImpl<F>,
                 &FindFirstGeImpl<F>,
                 &MassAtOrAboveImpl<F>,
                 &CollectBandImpl<F>,
                 &SelectedMassImpl<F>,
                 &DrawImpl<F>};
}

}  // namespace
}  // namespace llm::sampler::internal

#undef LLM_SAMPLER_INLINE

#endif  // LLM_SAMPLER_KERNELS_IMPL_H_
