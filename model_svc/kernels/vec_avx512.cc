// AVX-512 versions of some of vec.h. Compiled with -mavx512f and friends;
// only called after vec.cc has checked the CPU.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "model_svc/kernels/exp_libm.h"
#include "model_svc/kernels/head_shapes.h"
#include "model_svc/kernels/vec.h"
#include "model_svc/kernels/x86_simd.h"

namespace llm::kernels::vec_internal {
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

inline __m512 Load16(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline __m512 Load16(const float* p) { return _mm512_loadu_ps(p); }
// A row of T starting at element e (of Q8_0 rows, e a multiple of 32), and
// its elements [16c, 16c + 16): of Q8_0 rows, half of block c / 2, q
// converted to float and times d, exactly (see vec.h). With c a constant
// (the kernels' unrolled loops), the two halves of a block share its d.
template <typename T>
inline const T* RowAt(const T* p, int64_t e) {
  return p + e;
}
inline const KvQ8Block* RowAt(const KvQ8Block* p, int64_t e) { return p + (e >> 5); }
template <typename T>
inline __m512 Load16Of(const T* row, int c) {
  return Load16(row + 16 * c);
}
inline __m512 Load16Of(const KvQ8Block* row, int c) {
  const KvQ8Block& b = row[c >> 1];
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.q + 16 * (c & 1)));
  const __m512 d = _mm512_set1_ps(_cvtsh_ss(b.d));
  return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)), d);
}

// The sums of the eight lanes of a, b, c and d in the tree of the AVX2
// HorizontalSum ((l + l+4) + (l+2 + l+6), then the two halves), four at a
// time: [sum(a), sum(b), sum(c), sum(d)]. Every add is one of that tree's
// (in either operand order, which IEEE addition does not see), so the bits
// are the same.
inline __m128 HorizontalSums4(__m256 a, __m256 b, __m256 c, __m256 d) {
  const __m256 ab = _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20),
                                  _mm256_permute2f128_ps(a, b, 0x31));  // a: l + l+4 | b
  const __m256 cd =
      _mm256_add_ps(_mm256_permute2f128_ps(c, d, 0x20), _mm256_permute2f128_ps(c, d, 0x31));
  const __m256 lo =
      _mm256_castpd_ps(_mm256_unpacklo_pd(_mm256_castps_pd(ab), _mm256_castps_pd(cd)));
  const __m256 hi =
      _mm256_castpd_ps(_mm256_unpackhi_pd(_mm256_castps_pd(ab), _mm256_castps_pd(cd)));
  const __m256 w = _mm256_add_ps(lo, hi);  // [a0, a1, c0, c1 | b0, b1, d0, d1] (two partials each)
  const __m256 s = _mm256_add_ps(_mm256_shuffle_ps(w, w, 0x88), _mm256_shuffle_ps(w, w, 0xDD));
  // s = [a, c, a, c | b, d, b, d]
  return _mm_unpacklo_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
}

inline __m256 Halves(__m512 v) {
  return _mm256_add_ps(_mm512_castps512_ps256(v),
                       _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
}

// DotRowsHeads for head dimension kN and G heads: lanes 0-7 of a zmm
// accumulator are the AVX2 kernel's first chain (elements i..i+7 of each
// 16), lanes 8-15 its second, so each lane sees the same fmas in the same
// order, and the two chains are added and summed in the AVX2 tree. Four rows
// at a time: 4G accumulators, the query's kN / 16 vectors per head (kept in
// registers when they fit) and one chunk of a row.
template <int kN, int G, typename T>
void DotRowsHeadsImpl(const float* const* q, const T* k, int64_t stride, int64_t rows, float scale,
                      float* const* out) {
  constexpr int C = kN / 16;
  constexpr bool kQInRegisters = G * C <= 12;
  __m512 qv[kQInRegisters ? G : 1][kQInRegisters ? C : 1];
  if constexpr (kQInRegisters) {
#pragma GCC unroll 4
    for (int h = 0; h < G; ++h) {
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) qv[h][c] = _mm512_loadu_ps(q[h] + 16 * c);
    }
  }
  auto query = [&](int h, int c) {
    if constexpr (kQInRegisters) {
      return qv[h][c];
    } else {
      return _mm512_loadu_ps(q[h] + 16 * c);
    }
  };
  const __m128 vscale = _mm_set1_ps(scale);
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) {
    __m512 acc[4][G];
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
#pragma GCC unroll 4
      for (int h = 0; h < G; ++h) acc[j][h] = _mm512_setzero_ps();
    }
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        const __m512 kc = Load16Of(RowAt(k, (r + j) * stride), c);
#pragma GCC unroll 4
        for (int h = 0; h < G; ++h) acc[j][h] = _mm512_fmadd_ps(query(h, c), kc, acc[j][h]);
      }
    }
#pragma GCC unroll 4
    for (int h = 0; h < G; ++h) {
      const __m128 sums = HorizontalSums4(Halves(acc[0][h]), Halves(acc[1][h]), Halves(acc[2][h]),
                                          Halves(acc[3][h]));
      _mm_storeu_ps(out[h] + r, _mm_mul_ps(sums, vscale));
    }
  }
  for (; r < rows; ++r) {
    __m512 acc[G];
#pragma GCC unroll 4
    for (int h = 0; h < G; ++h) acc[h] = _mm512_setzero_ps();
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      const __m512 kc = Load16Of(RowAt(k, r * stride), c);
#pragma GCC unroll 4
      for (int h = 0; h < G; ++h) acc[h] = _mm512_fmadd_ps(query(h, c), kc, acc[h]);
    }
#pragma GCC unroll 4
    for (int h = 0; h < G; ++h) {
      const __m256 z = _mm256_setzero_ps();
      out[h][r] = _mm_cvtss_f32(HorizontalSums4(Halves(acc[h]), z, z, z)) * scale;
    }
  }
}

// AxpyRowsHeads for head dimension kN and G heads: all G * kN / 16
// accumulators in registers for the whole run of rows when they fit (else
// slices of 64 elements); per element the AVX2 kernel's fmas, row by row.
template <int kN, int G, typename T>
void AxpyRowsHeadsImpl(const float* const* w, const T* v, int64_t stride, int64_t rows,
                       float* const* acc) {
  constexpr int S = G * kN / 16 <= 24 ? kN : 64;
  for (int s0 = 0; s0 < kN; s0 += S) {
    __m512 a[G][S / 16];
#pragma GCC unroll 4
    for (int h = 0; h < G; ++h) {
#pragma GCC unroll 8
      for (int j = 0; j < S / 16; ++j) a[h][j] = _mm512_loadu_ps(acc[h] + s0 + 16 * j);
    }
    for (int64_t r = 0; r < rows; ++r) {
      const T* vr = RowAt(v, r * stride + s0);
      __m512 x[S / 16];
#pragma GCC unroll 8
      for (int j = 0; j < S / 16; ++j) x[j] = Load16Of(vr, j);
#pragma GCC unroll 4
      for (int h = 0; h < G; ++h) {
        const __m512 vw = _mm512_set1_ps(w[h][r]);
#pragma GCC unroll 8
        for (int j = 0; j < S / 16; ++j) a[h][j] = _mm512_fmadd_ps(vw, x[j], a[h][j]);
      }
    }
#pragma GCC unroll 4
    for (int h = 0; h < G; ++h) {
#pragma GCC unroll 8
      for (int j = 0; j < S / 16; ++j) _mm512_storeu_ps(acc[h] + s0 + 16 * j, a[h][j]);
    }
  }
}

// x[l] = element l of every x[j], j < 16 (a 16 x 16 transpose): unpacks
// pair the rows, then 128-bit lanes are gathered in two shuffles.
//
// (The unpacks and shuffles are the masked forms with every lane kept:
// GCC 12's unmasked ones pass an undefined vector that -Wuninitialized reports.)
__attribute__((always_inline)) inline void Transpose16(__m512 x[16]) {
  constexpr __mmask16 kAll16 = 0xFFFF;
  constexpr __mmask8 kAll8 = 0xFF;
  __m512 t[16];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_mask_unpacklo_ps(x[2 * i], kAll16, x[2 * i], x[2 * i + 1]);
    t[2 * i + 1] = _mm512_mask_unpackhi_ps(x[2 * i], kAll16, x[2 * i], x[2 * i + 1]);
  }
  // u[4i + e]: in 128-bit lane m, element 4m + e of rows 4i..4i+3.
  __m512 u[16];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    const __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 2]);
    const __m512d c = _mm512_castps_pd(t[4 * i + 1]), d = _mm512_castps_pd(t[4 * i + 3]);
    u[4 * i] = _mm512_castpd_ps(_mm512_mask_unpacklo_pd(a, kAll8, a, b));
    u[4 * i + 1] = _mm512_castpd_ps(_mm512_mask_unpackhi_pd(a, kAll8, a, b));
    u[4 * i + 2] = _mm512_castpd_ps(_mm512_mask_unpacklo_pd(c, kAll8, c, d));
    u[4 * i + 3] = _mm512_castpd_ps(_mm512_mask_unpackhi_pd(c, kAll8, c, d));
  }
#pragma GCC unroll 4
  for (int e = 0; e < 4; ++e) {
    const __m512 v0 =
        _mm512_mask_shuffle_f32x4(u[e], kAll16, u[e], u[4 + e], 0x88);  // lanes 0, 2 of each
    const __m512 w0 = _mm512_mask_shuffle_f32x4(u[e], kAll16, u[e], u[4 + e], 0xDD);  // lanes 1, 3
    const __m512 v1 = _mm512_mask_shuffle_f32x4(u[8 + e], kAll16, u[8 + e], u[12 + e], 0x88);
    const __m512 w1 = _mm512_mask_shuffle_f32x4(u[8 + e], kAll16, u[8 + e], u[12 + e], 0xDD);
    x[e] = _mm512_mask_shuffle_f32x4(v0, kAll16, v0, v1, 0x88);       // lane 0: elements 0-3
    x[8 + e] = _mm512_mask_shuffle_f32x4(v0, kAll16, v0, v1, 0xDD);   // lane 2: elements 8-11
    x[4 + e] = _mm512_mask_shuffle_f32x4(w0, kAll16, w0, w1, 0x88);   // lane 1: elements 4-7
    x[12 + e] = _mm512_mask_shuffle_f32x4(w0, kAll16, w0, w1, 0xDD);  // lane 3: elements 12-15
  }
}

// acc = fma(*x in every lane, v, acc), the broadcast in the fma's memory
// operand (vfmadd231ps m32{1to16}): GCC would broadcast into a register and
// load v again for each use instead, two loads an fma.
__attribute__((always_inline)) inline void FmaBroadcast(const float* x, __m512 v, __m512& acc) {
  asm("vfmadd231ps %[x]%{1to16%}, %[v], %[acc]" : [acc] "+v"(acc) : [v] "v"(v), [x] "m"(*x));
}

// The 16 scores of Q queries q[0..Q) for the 16 rows whose transpose is kt
// (kt[16e + r]: element e of row r), scaled. Per query, accumulator P_l is
// DotRowsHeadsImpl's accumulator lane l (the fmas of elements 16c + l, c in
// order, from zero) for the 16 rows at once, and its Halves and
// HorizontalSums4 tree (l + l+8, then l + l+4, l + l+2, l + l+1) are adds
// between the accumulators: the same operations on the same values, so the
// same bits, without horizontal sums. The accumulators are taken four at a
// time, those the tree's first two levels join (P_m, P_m+8, P_m+4, P_m+12
// into A_m), so that Q = 3 queries fit the 32 registers and share each load
// of kt.
template <int kN, int Q>
inline void ScoreRows16(const float* const* q, const float* kt, __m512 scale, __m512 out[Q]) {
  constexpr int C = kN / 16;
  constexpr int kJoined[4] = {0, 8, 4, 12};
  __m512 a[Q][4];
#pragma GCC unroll 4
  for (int m = 0; m < 4; ++m) {
    __m512 p[Q][4];
#pragma GCC unroll 4
    for (int i = 0; i < Q; ++i) {
#pragma GCC unroll 4
      for (int u = 0; u < 4; ++u) p[i][u] = _mm512_setzero_ps();
    }
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) {
#pragma GCC unroll 4
      for (int u = 0; u < 4; ++u) {
        const int e = 16 * c + m + kJoined[u];
        const __m512 column = _mm512_load_ps(kt + 16 * e);
#pragma GCC unroll 4
        for (int i = 0; i < Q; ++i) FmaBroadcast(q[i] + e, column, p[i][u]);
      }
    }
#pragma GCC unroll 4
    for (int i = 0; i < Q; ++i) {
      a[i][m] = _mm512_add_ps(_mm512_add_ps(p[i][0], p[i][1]), _mm512_add_ps(p[i][2], p[i][3]));
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < Q; ++i) {
    const __m512 b0 = _mm512_add_ps(a[i][0], a[i][2]), b1 = _mm512_add_ps(a[i][1], a[i][3]);
    out[i] = _mm512_mul_ps(_mm512_add_ps(b0, b1), scale);
  }
}

// DotRowsQueries for head dimension kN: each 16 rows converted to fp32 and
// transposed once (kt), then the queries that need them three at a time
// (ScoreRows16), each query's lanes [lo, hi) stored at its part's place.
template <int kN, typename T>
void DotRowsQueriesImpl(const float* const* q, int nq, const T* k, int64_t stride, int64_t rows,
                        float scale, const int64_t* begin, const int64_t* end, float* const* out) {
  constexpr int C = kN / 16;
  alignas(64) float kt[kN * 16];
  const __m512 vscale = _mm512_set1_ps(scale);
  int need_stack[64];  // the queries that need the 16 rows
  std::vector<int> need_heap(nq > 64 ? nq : 0);
  int* const need = nq > 64 ? need_heap.data() : need_stack;
  for (int64_t r0 = 0; r0 < rows; r0 += 16) {
    const int64_t m = std::min<int64_t>(16, rows - r0);
    int count = 0;
    for (int i = 0; i < nq; ++i) {
      if (begin[i] < r0 + m && end[i] > r0) need[count++] = i;
    }
    if (count == 0) continue;
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) {
      __m512 x[16];
#pragma GCC unroll 16
      for (int j = 0; j < 16; ++j) {
        x[j] = j < m ? Load16Of(RowAt(k, (r0 + j) * stride), c) : _mm512_setzero_ps();
      }
      Transpose16(x);
#pragma GCC unroll 16
      for (int l = 0; l < 16; ++l) _mm512_store_ps(kt + (16 * c + l) * 16, x[l]);
    }
    // Query need[n]'s scores s, lanes [lo, hi) - r0, to out[i][lo - begin[i]] on.
    auto store = [&](int n, __m512 s) {
      const int i = need[n];
      const int64_t lo = std::max(begin[i], r0), hi = std::min(end[i], r0 + m);
      const int shift = static_cast<int>(lo - r0), lanes = static_cast<int>(hi - lo);
      if (shift > 0) s = _mm512_maskz_compress_ps(static_cast<__mmask16>(0xFFFFu << shift), s);
      _mm512_mask_storeu_ps(out[i] + (lo - begin[i]),
                            static_cast<__mmask16>((uint32_t{1} << lanes) - 1), s);
    };
    int n = 0;
    for (; n + 3 <= count; n += 3) {
      const float* qs[3] = {q[need[n]], q[need[n + 1]], q[need[n + 2]]};
      __m512 s[3];
      ScoreRows16<kN, 3>(qs, kt, vscale, s);
      for (int u = 0; u < 3; ++u) store(n + u, s[u]);
    }
    for (; n < count; ++n) {
      __m512 s[1];
      ScoreRows16<kN, 1>(&q[need[n]], kt, vscale, s);
      store(n, s[0]);
    }
  }
}

// The AVX2 kernels' Cephes exp (x86_simd.h) in 16 lanes: the same
// operations per lane, so the same bits.
inline __m512 ExpCephes16(__m512 x) { return x86::ExpCephes<x86::Zmm>(x); }

}  // namespace

void MaskF32Avx512(const float* x, const uint64_t* bits, float* out, int64_t n) {
  const __m512 masked = _mm512_set1_ps(-INFINITY);
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    const uint64_t w = bits[i >> 6];
    for (int g = 0; g < 4; ++g) {
      const auto keep = static_cast<__mmask16>(w >> (16 * g));
      _mm512_storeu_ps(out + i + 16 * g,
                       _mm512_mask_blend_ps(keep, masked, _mm512_loadu_ps(x + i + 16 * g)));
    }
  }
  for (; i < n; ++i) out[i] = ((bits[i >> 6] >> (i & 63)) & 1) != 0 ? x[i] : -INFINITY;
}

double SumExpF32Avx512(const float* x, int64_t n, float shift) {
  const __m512 s = _mm512_set1_ps(shift);
  double total = 0;
  int64_t i = 0;
  while (i + 8 <= n) {
    // As SumExpF32Avx2: its two float accumulators are this one's halves
    // (elements i..i+7 of every 16 in lanes 0-7, i+8..i+15 in 8-15), over at
    // most 4096 elements, then summed in its tree into the double total.
    // (The compiler may fuse either kernel's last multiply, p * 2^k, into the
    // add that accumulates it; that product is exact, as the clamp keeps k >=
    // -126 with p > 1, so fused or not the sums are the same.)
    __m512 acc = _mm512_setzero_ps();
    const int64_t end = std::min(n, i + 4096);
    for (; i + 16 <= end; i += 16) {
      acc = _mm512_add_ps(acc, ExpCephes16(_mm512_sub_ps(_mm512_loadu_ps(x + i), s)));
    }
    if (i + 8 <= end) {  // eight more: the first accumulator's lanes only
      const __m512 e = ExpCephes16(_mm512_sub_ps(_mm512_maskz_loadu_ps(0xFF, x + i), s));
      acc = _mm512_mask_add_ps(acc, 0xFF, acc, e);
      i += 8;
    }
    const __m256 z = _mm256_setzero_ps();
    total += _mm_cvtss_f32(HorizontalSums4(Halves(acc), z, z, z));
  }
  for (; i < n; ++i) total += std::exp(x[i] - shift);
  return total;
}

bool DotRowsHeadsAvx512(const float* const* q, int g, const uint16_t* k, int64_t stride,
                        int64_t rows, int64_t n, float scale, float* const* out) {
  return WithHeadShape<1>(
      n, g, [&]<int kN, int G>() { DotRowsHeadsImpl<kN, G>(q, k, stride, rows, scale, out); });
}
bool DotRowsHeadsAvx512(const float* const* q, int g, const float* k, int64_t stride, int64_t rows,
                        int64_t n, float scale, float* const* out) {
  return WithHeadShape<1>(
      n, g, [&]<int kN, int G>() { DotRowsHeadsImpl<kN, G>(q, k, stride, rows, scale, out); });
}
bool AxpyRowsHeadsAvx512(const float* const* w, int g, const uint16_t* v, int64_t stride,
                         int64_t rows, int64_t n, float* const* acc) {
  return WithHeadShape<1>(
      n, g, [&]<int kN, int G>() { AxpyRowsHeadsImpl<kN, G>(w, v, stride, rows, acc); });
}
bool AxpyRowsHeadsAvx512(const float* const* w, int g, const float* v, int64_t stride, int64_t rows,
                         int64_t n, float* const* acc) {
  return WithHeadShape<1>(
      n, g, [&]<int kN, int G>() { AxpyRowsHeadsImpl<kN, G>(w, v, stride, rows, acc); });
}

bool DotRowsHeadsAvx512(const float* const* q, int g, const KvQ8Block* k, int64_t stride,
                        int64_t rows, int64_t n, float scale, float* const* out) {
  return WithHeadShape<1>(
      n, g, [&]<int kN, int G>() { DotRowsHeadsImpl<kN, G>(q, k, stride, rows, scale, out); });
}
bool AxpyRowsHeadsAvx512(const float* const* w, int g, const KvQ8Block* v, int64_t stride,
                         int64_t rows, int64_t n, float* const* acc) {
  return WithHeadShape<1>(
      n, g, [&]<int kN, int G>() { AxpyRowsHeadsImpl<kN, G>(w, v, stride, rows, acc); });
}

template <typename T>
bool DotRowsQueriesAvx512Of(const float* const* q, int nq, const T* k, int64_t stride, int64_t rows,
                            int64_t n, float scale, const int64_t* begin, const int64_t* end,
                            float* const* out) {
  switch (n) {
    case 64:
      DotRowsQueriesImpl<64>(q, nq, k, stride, rows, scale, begin, end, out);
      return true;
    case 128:
      DotRowsQueriesImpl<128>(q, nq, k, stride, rows, scale, begin, end, out);
      return true;
    case 256:
      DotRowsQueriesImpl<256>(q, nq, k, stride, rows, scale, begin, end, out);
      return true;
    default:
      return false;
  }
}

bool DotRowsQueriesAvx512(const float* const* q, int nq, const uint16_t* k, int64_t stride,
                          int64_t rows, int64_t n, float scale, const int64_t* begin,
                          const int64_t* end, float* const* out) {
  return DotRowsQueriesAvx512Of(q, nq, k, stride, rows, n, scale, begin, end, out);
}
bool DotRowsQueriesAvx512(const float* const* q, int nq, const float* k, int64_t stride,
                          int64_t rows, int64_t n, float scale, const int64_t* begin,
                          const int64_t* end, float* const* out) {
  return DotRowsQueriesAvx512Of(q, nq, k, stride, rows, n, scale, begin, end, out);
}
bool DotRowsQueriesAvx512(const float* const* q, int nq, const KvQ8Block* k, int64_t stride,
                          int64_t rows, int64_t n, float scale, const int64_t* begin,
                          const int64_t* end, float* const* out) {
  return DotRowsQueriesAvx512Of(q, nq, k, stride, rows, n, scale, begin, end, out);
}

void ScaleF32Avx512(float* x, float s, int64_t n) {
  const __m512 vs = _mm512_set1_ps(s);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(x + i, _mm512_mul_ps(_mm512_loadu_ps(x + i), vs));
  if (i < n) {
    const auto tail = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(x + i, tail, _mm512_mul_ps(_mm512_maskz_loadu_ps(tail, x + i), vs));
  }
}

void ExpLibmAvx512(const float* x, float* out, int64_t n) {
  exp_libm::ExpLoop(x, out, n, Exp8Libm);
}

void SiluMulAvx512(const float* gate, const float* up, float* out, int64_t n) {
  exp_libm::SiluMulLoop(gate, up, out, n, Exp8Libm);
}

}  // namespace llm::kernels::vec_internal
