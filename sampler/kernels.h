// Vectorized passes over a vocabulary-sized float array, used by sampler.cc.
// Internal to llm_sampler.
//
// Two builds of the same source (kernels_impl.h): the baseline one
// (kernels_generic.cc: SSE2 on x86-64, plain GCC vectors elsewhere) and an
// AVX2 one (kernels_avx2.cc, compiled with -mavx2, x86-64 only, never called on
// a CPU without AVX2). Both process 32 "logical lanes" per step, accumulate
// each lane separately and reduce the lanes in one fixed order, and neither
// uses FMA, so their results are identical bit for bit: a seeded run draws the
// same tokens on any x86-64 CPU.
//
// exp: ExpSum computes 2^((x - shift) * scale) with its own polynomial (relative
// error below 2e-7), not libm, so results do not depend on the C library either.
// It returns exactly 1 where x == shift and exactly 0 where the exponent is
// below -125 or x is -inf.
//
// Threads: pure functions of their arguments.
#ifndef LLM_SAMPLER_KERNELS_H_
#define LLM_SAMPLER_KERNELS_H_

#include <cstdint>

namespace llm::sampler::internal {

struct MaxScan {
  float max;        // largest element (-inf if all are -inf); meaningless if !all_finite
  bool all_finite;  // no NaN and no +-inf
};

struct MassCount {
  double mass;    // sum of the selected elements
  int64_t count;  // how many were selected
};

// Largest number of thresholds MassAtOrAbove takes in one pass.
inline constexpr int kMaxThresholds = 8;

struct Kernels {
  const char* name;  // "baseline" or "avx2"
  // Max of x[0, n) and whether every element is finite. Cost: one pass.
  MaxScan (*scan_max)(const float* x, int64_t n);
  // sum_i 2^((x[i] - shift) * scale); also writes each term to out[i] when out
  // is not null. Expects (x[i] - shift) * scale <= 0 (larger values, up to
  // 127, are still computed correctly). Cost: one pass.
  double (*exp_sum)(const float* x, int64_t n, float shift, float scale, float* out);
  // First i in [begin, n) with x[i] >= threshold, or n. Cost: up to one pass.
  int64_t (*find_first_ge)(const float* x, int64_t begin, int64_t n, float threshold);
  // mass[j] = sum of the p[i] >= thresholds[j], for count <= kMaxThresholds
  // thresholds. Expects p[i] >= 0. Cost: one pass.
  void (*mass_at_or_above)(const float* p, int64_t n, const float* thresholds, int count,
                           double* mass);
  // Writes the indices i with lo <= p[i] < hi to out_idx and their values to
  // out_val (in increasing order of i; room for n each) and returns how many.
  // Expects lo >= 0 (hi may be +inf). Cost: one pass.
  int64_t (*collect_band)(const float* p, int64_t n, float lo, float hi, int32_t* out_idx,
                          float* out_val);
  // Sum and count of the p[i] >= tau (inclusive) or p[i] > tau. Cost: one pass.
  MassCount (*selected_mass)(const float* p, int64_t n, float tau, bool inclusive);
  // Walks the elements selected as in selected_mass, in index order, summing
  // them in exactly the same way, and returns the first index at which the
  // running sum exceeds target; -1 if it never does (target >= the total).
  // Cost: up to one pass.
  int64_t (*draw)(const float* p, int64_t n, float tau, bool inclusive, double target);
};

// The portable set; always available.
const Kernels& BaselineKernels();
// The AVX2 set, or null when this CPU lacks AVX2 or the build is not x86-64.
const Kernels* Avx2Kernels();
// AVX2 when available, else the baseline.
const Kernels& BestKernels();

// The AVX2 set without the CPU check (defined in kernels_avx2.cc, which only
// x86-64 builds compile).
const Kernels& Avx2KernelsUnchecked();

}  // namespace llm::sampler::internal

#endif  // LLM_SAMPLER_KERNELS_H_
