// AVX-512 VNNI kernels. This file is compiled with -mavx512f -mavx512bw
// -mavx512vl -mavx512vnni -mavx2 -mfma -mf16c -ffp-contract=off; nothing in
// it may run before quant.cc has checked CpuHasAvx512Vnni().
//
// What is here: the multi-token matrix kernel (2 or more tokens) for the
// formats whose block sum is one plain integer dot product: Q4_0, Q4_1, Q5_0,
// Q5_1, Q8_0, Q4_K, Q5_K, IQ4_NL and IQ4_XS, and for Q2_K, Q3_K and Q6_K,
// whose sums have a scale per 16 elements (kHalvesFormat). One token of a
// K-quant goes to quant_avx512_decode.cc. Everything else (one token of the
// other formats; the float types, dequantization, QuantizeQ8) is the AVX2
// kernels', which this set calls.
//
// Batch invariance, as in quant_avx2.cc: a vector lane always holds one
// (row, token) pair and performs exactly the fp32 operations of the
// canonical order (quant.h) for it, per block
//   acc = fma(dw * x.d, float(isum), acc)  [, acc = fma(m, x.s, acc)],
// so the results are the AVX2 and scalar kernels' bits, whatever the tile.
//
// TokenTile<F, R, V>: R rows x V::kTokens (16, on zmm) tokens. As in
// the AVX2 Token8Tile, the tokens' activations are first interleaved (once
// per call) so that one vector load holds elements 4g..4g+3 of every token
// (group g of a block), and each group of 4 weights is broadcast to all
// lanes. vpdpbusd then adds the 4 products of a (row, token) pair straight
// into the int32 lane: one instruction per group and row, with no int16
// stage, against vpmaddubsw + vpaddw (+ vpmaddwd) in AVX2.
//
// FourTokenTile<F, G, NG>: 2-8 tokens, 4 rows x 4 tokens in each zmm (see
// there).
//
// vpdpbusd multiplies unsigned bytes (the broadcast weights) by signed bytes
// (the activations, in [-127, 127]). Weights whose codes are signed or carry
// an offset are fed as unsigned u = q + k: Q4_0 (k = 8) and Q5_0 (k = 16)
// store them so already, Q8_0, IQ4_NL and IQ4_XS take q ^ 0x80 = q + 128. The chain of a block
// then starts from -k * sum(x.q) (the token's code sum, kept with the
// interleaved activations), so that it ends at exactly sum(q * x.q): all
// integer, no overflow (|sum(u * x)| <= 32 * 255 * 127 < 2^21).
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "model_svc/formats/weight_formats.h"
#include "model_svc/kernels/avx512_vnni_target.h"
#include "model_svc/kernels/quant_internal.h"
#include "model_svc/kernels/quant_x86_formats.h"
#include "model_svc/kernels/tile_drivers.h"

namespace llm::kernels::internal {
namespace {

// ---------------------------------------------------------------------------
// Formats.

// The formats this file handles, and how their codes become vpdpbusd's
// unsigned operand: kVnniOffset is k above (the unsigned lanes are q + k).
template <class F>
constexpr bool kVnniFormat = kOneSumFormat<F>;

// The formats whose block sum has a scale per 16 elements (Q2_K, Q3_K, Q6_K):
// the tiles keep two chains per block, elements 0..15 and 16..31, and add
// them times their sub-scales, exactly (quant.h).
template <class F>
constexpr bool kHalvesFormat =
    std::is_same_v<F, Q2_K> || std::is_same_v<F, Q3_K> || std::is_same_v<F, Q6_K>;

template <class F>
constexpr int kVnniOffset = F::kSigned ? 128 : F::kOffset;

// log2 of kVnniOffset (a power of two, or 0): the start of a block's chain is
// -sum(x.q) << kOffsetShift.
template <class F>
constexpr int kOffsetShift = kVnniOffset<F> == 128  ? 7
                             : kVnniOffset<F> == 16 ? 4
                             : kVnniOffset<F> == 8  ? 3
                             : kVnniOffset<F> == 4  ? 2
                                                    : 0;
static_assert(kVnniOffset<Q4_0> == 8 && kOffsetShift<Q4_0> == 3);
static_assert(kVnniOffset<Q5_0> == 16 && kOffsetShift<Q5_0> == 4);
static_assert(kVnniOffset<Q8_0> == 128 && kOffsetShift<Q8_0> == 7);
static_assert(kVnniOffset<Q4_1> == 0 && kVnniOffset<Q5_1> == 0 && kVnniOffset<Q4_K> == 0);
static_assert(kVnniOffset<Q3_K> == 4 && kOffsetShift<Q3_K> == 2);
static_assert(kVnniOffset<Q6_K> == 128 && kVnniOffset<Q2_K> == 0);

// The unsigned lanes of an unpacked block.
template <class F>
inline __m256i UnsignedLanes(const WeightBlock& wb) {
  if constexpr (F::kSigned) {
    return _mm256_xor_si256(wb.q, _mm256_set1_epi8(static_cast<char>(0x80)));
  } else {
    return wb.q;
  }
}

// ---------------------------------------------------------------------------
// Vector width: V16 (zmm, 16 tokens). (A V8 on ymm took 3-8 tokens until
// FourTokenTile did it for less.)

struct V16 {
  static constexpr int kTokens = 16;
  using I = __m512i;
  using F = __m512;
  static I ZeroI() { return _mm512_setzero_si512(); }
  static F ZeroF() { return _mm512_setzero_ps(); }
  static I Load(const void* p) { return _mm512_load_si512(p); }
  static F LoadF(const float* p) { return _mm512_load_ps(p); }
  static I Broadcast32(const uint8_t* p) { return _mm512_set1_epi32(static_cast<int>(LoadU32(p))); }
  static I Dot(I acc, I u, I s) { return _mm512_dpbusd_epi32(acc, u, s); }
  static I Sub(I a, I b) { return _mm512_sub_epi32(a, b); }
  static I AddI(I a, I b) { return _mm512_add_epi32(a, b); }
  static I MulLo(I a, I b) { return _mm512_mullo_epi32(a, b); }
  static I Set1I(int v) { return _mm512_set1_epi32(v); }
  template <int kShift>
  static I ShiftLeft(I v) {
    return _mm512_slli_epi32(v, kShift);
  }
  static F ToFloat(I v) { return _mm512_cvtepi32_ps(v); }
  static F Set1(float v) { return _mm512_set1_ps(v); }
  static F Mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F Fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static void Store(float* p, F v) { _mm512_store_ps(p, v); }
};

// ---------------------------------------------------------------------------
// Interleaved activations.

// One 32-element block of T tokens (T = 8 or 16): q[g] holds elements
// 4g..4g+3 of token 0, then of token 1, ... (4 bytes each); the tokens' d, s,
// -sum(q) and -sum(q[0..15]). Missing tokens of a partial group are zero.
template <int T>
struct alignas(64) XBlock {
  int8_t q[8][4 * T];
  float d[T];
  float s[T];
  int32_t neg_sum[T];
  int32_t neg_sum_lo[T];  // elements 0..15 (groups 0-3)
};
static_assert(sizeof(XBlock<16>) == 768 && sizeof(XBlock<8>) == 384);

// Interleaves block b of tokens xs[0..nt) (nt <= T) for every b < num_blocks.
// Tokens go 8 at a time (TransposeGroups8) into the two halves
// of a group's 64 bytes when T = 16.
template <int T>
void InterleaveTokens(const BlockQ8* const* xs, int nt, int64_t num_blocks, XBlock<T>* out) {
  static constexpr BlockQ8 kZero = {};
  const BlockQ8* x[T];
  int64_t step[T];
  for (int t = 0; t < T; ++t) {
    x[t] = t < nt ? xs[t] : &kZero;
    step[t] = t < nt ? 1 : 0;
  }
  const __m256i ones = _mm256_set1_epi8(1);
  for (int64_t b = 0; b < num_blocks; ++b, ++out) {
#pragma GCC unroll 2
    for (int h = 0; h < T / 8; ++h) {
      const BlockQ8* const* y = x + 8 * h;
      __m256 g[8];
      TransposeGroups8(y, g);
      // Dword lane t of every group belongs to token 8h + t: the sum of its
      // codes is the sum over the groups of vpdpbusd(1, group).
      __m256i sum = _mm256_setzero_si256();
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) {
        _mm256_store_si256(reinterpret_cast<__m256i*>(out->q[i] + 32 * h),
                           _mm256_castps_si256(g[i]));
        sum = _mm256_dpbusd_epi32(sum, ones, _mm256_castps_si256(g[i]));
        if (i == 3) {
          _mm256_store_si256(reinterpret_cast<__m256i*>(out->neg_sum_lo + 8 * h),
                             _mm256_sub_epi32(_mm256_setzero_si256(), sum));
        }
      }
      _mm256_store_si256(reinterpret_cast<__m256i*>(out->neg_sum + 8 * h),
                         _mm256_sub_epi32(_mm256_setzero_si256(), sum));
      __m256 d, s;
      LoadScales8(y, &d, &s);
      _mm256_store_ps(out->d + 8 * h, d);
      _mm256_store_ps(out->s + 8 * h, s);
    }
    for (int t = 0; t < T; ++t) x[t] += step[t];
  }
}

// ---------------------------------------------------------------------------
// TokenTile.

// Transposes 8 rows of 16 lanes: on return, for i < 4, v[i] holds lane i of
// the 8 rows (in order) in its low 256 bits and lane 4 + i in its high 256
// bits, v[4 + i] lanes 8 + i and 12 + i.
[[gnu::always_inline]] inline void Transpose8x16(__m512* v) {
  __m512 t[8], u[8];
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    t[2 * k] = _mm512_unpacklo_ps(v[2 * k], v[2 * k + 1]);
    t[2 * k + 1] = _mm512_unpackhi_ps(v[2 * k], v[2 * k + 1]);
  }
  // u[i] (i < 4): 128-bit lane k = lane 4k + i of rows 0..3; u[4 + i]: rows 4..7.
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    u[4 * h + 0] = _mm512_shuffle_ps(t[4 * h], t[4 * h + 2], 0x44);
    u[4 * h + 1] = _mm512_shuffle_ps(t[4 * h], t[4 * h + 2], 0xEE);
    u[4 * h + 2] = _mm512_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0x44);
    u[4 * h + 3] = _mm512_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0xEE);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    // [u[i].0, u[i].1, u[4+i].0, u[4+i].1] -> [u[i].0, u[4+i].0, u[i].1, u[4+i].1].
    const __m512 lo = _mm512_shuffle_f32x4(u[i], u[4 + i], 0x44);
    const __m512 hi = _mm512_shuffle_f32x4(u[i], u[4 + i], 0xEE);
    v[i] = _mm512_shuffle_f32x4(lo, lo, 0xD8);
    v[4 + i] = _mm512_shuffle_f32x4(hi, hi, 0xD8);
  }
}

inline __m256 High256(__m512 v) {
  return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
}

// out[t * out_stride + r] = lane t of acc[r], for r < R and t < nt.
template <int R, class V>
[[gnu::always_inline]] inline void StoreTile(typename V::F* acc, int nt, float* out,
                                             int64_t out_stride) {
  if constexpr (R == 8) {
    // 8 consecutive outputs per token: one transpose and 16 stores.
    Transpose8x16(acc);
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      const int t[4] = {i, 4 + i, 8 + i, 12 + i};
      const __m256 v[4] = {_mm512_castps512_ps256(acc[i]), High256(acc[i]),
                           _mm512_castps512_ps256(acc[4 + i]), High256(acc[4 + i])};
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        if (t[k] < nt) _mm256_storeu_ps(out + t[k] * out_stride, v[k]);
      }
    }
  } else {
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      alignas(64) float lanes[V::kTokens];
      V::Store(lanes, acc[r]);
      for (int t = 0; t < nt; ++t) out[t * out_stride + r] = lanes[t];
    }
  }
}

// out[t * out_stride + r] = dot(row r, token t) for r < R and t < nt
// (<= V::kTokens). Lane t of acc[r] is the pair (row r, token t).
template <class F, int R, class V>
void TokenTile(const uint8_t* w, size_t row_bytes, int64_t num_blocks, const XBlock<V::kTokens>* x,
               int nt, float* out, int64_t out_stride) {
  static_assert(kVnniFormat<F> || kHalvesFormat<F>);
  using I = typename V::I;
  using Fv = typename V::F;
  Fv acc[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) acc[r] = V::ZeroF();
  for (int64_t b = 0; b < num_blocks; ++b) {
    PrefetchAhead<R * F::kBlockBytes>(w, row_bytes, b);
    typename F::Header header[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      header[r] = F::Prepare(w + static_cast<size_t>(r) * row_bytes + b * F::kBlockBytes);
    }
    for (int j = 0; j < F::kSubBlocks; ++j) {
      // Q2_K's second pass (its min step) reads the same activations.
      const XBlock<V::kTokens>& xb = x[b * (F::kSubBlocks / Passes<F>()) + j / Passes<F>()];
      // The unsigned lanes and the [d, m] scales go through memory so that
      // each group (scale) is one broadcast load, a load-port uop, not a
      // shuffle on the ports the products and fmas need.
      alignas(32) uint8_t u[R][32];
      alignas(16) float dm[R][4];
      alignas(32) int16_t sub[R][16];  // kHalvesFormat: sub-scales at 0 and 8
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const WeightBlock wb = F::Unpack(header[r], j);
        _mm256_store_si256(reinterpret_cast<__m256i*>(u[r]), UnsignedLanes<F>(wb));
        _mm_store_ps(dm[r], wb.dm);
        if constexpr (kHalvesFormat<F>) {
          _mm256_store_si256(reinterpret_cast<__m256i*>(sub[r]), wb.sub_scales);
        }
      }
      // "Modifies" them: GCC must read them back from memory (otherwise it
      // turns the broadcast loads into shuffles of the registers).
      asm("" : "+m"(u), "+m"(dm));
      if constexpr (kHalvesFormat<F>) asm("" : "+m"(sub));
      // chain[r] = start + the products of row r over groups [g0, g1).
      I chain[R];
      auto run_chains = [&](I start, int g0, int g1) {
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) chain[r] = start;
#pragma GCC unroll 8
        for (int g = g0; g < g1; ++g) {
          const I xq = V::Load(xb.q[g]);
#pragma GCC unroll 16
          for (int r = 0; r < R; ++r) chain[r] = V::Dot(chain[r], V::Broadcast32(u[r] + 4 * g), xq);
        }
      };
      I isum[R];
      if constexpr (kHalvesFormat<F>) {
        // Two chains, groups 0-3 and 4-7, each from -offset * its codes' sum.
        I start_lo = V::ZeroI(), start_hi = V::ZeroI();
        if constexpr (kVnniOffset<F> != 0) {
          const I lo = V::Load(xb.neg_sum_lo);
          start_lo = V::template ShiftLeft<kOffsetShift<F>>(lo);
          start_hi = V::template ShiftLeft<kOffsetShift<F>>(V::Sub(V::Load(xb.neg_sum), lo));
        }
        run_chains(start_lo, 0, 4);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) isum[r] = V::MulLo(chain[r], V::Set1I(sub[r][0]));
        run_chains(start_hi, 4, 8);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
          isum[r] = V::AddI(isum[r], V::MulLo(chain[r], V::Set1I(sub[r][8])));
        }
      } else {
        I start = V::ZeroI();
        if constexpr (kVnniOffset<F> != 0) {
          start = V::template ShiftLeft<kOffsetShift<F>>(V::Load(xb.neg_sum));
        }
        run_chains(start, 0, 8);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) isum[r] = chain[r];
      }
      const Fv xd = V::LoadF(xb.d);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const Fv scale = V::Mul(V::Set1(dm[r][0]), xd);
        acc[r] = V::Fma(scale, V::ToFloat(isum[r]), acc[r]);
        if constexpr (F::kMin) acc[r] = V::Fma(V::Set1(dm[r][1]), V::LoadF(xb.s), acc[r]);
      }
    }
  }
  StoreTile<R, V>(acc, nt, out, out_stride);
}

// ---------------------------------------------------------------------------
// FourTokenTile: 2 to 8 tokens.
//
// A token tile leaves most of its lanes empty with 2-8 tokens, and its per-row
// work, unpacking and broadcasting the weights, is most of its time
// (bench/README.md, "Measurements behind the code"). Here lane 4r + t of a
// zmm is the pair (row r, token t) of a group of 4 rows and of 4 tokens (one
// group of tokens for 2-4, two for 5-8):
//   - the tokens' group g is 16 bytes of XBlock<8>'s (tokens 0-3, or 4-7),
//     broadcast to the four 128-bit lanes by the load;
//   - the rows' unsigned lanes sit in two zmm, row r's elements 0-15 and
//     16-31 in 128-bit lane r, and vpshufd (which runs beside vpdpbusd, see
//     matmul_bench's BM_IssueMix for the like) picks group g of each row for
//     its 4 tokens;
//   - the rows' d and m are expanded to [r0 x4, r1 x4, r2 x4, r3 x4], the
//     tokens' d, s and -sum(q) broadcast as [t0..t3] x4.
// Moving each row into its 128-bit lane (and expanding d and m) costs
// cross-lane instructions, which do compete with vpdpbusd: Q4_0 and Q4_1 load
// their nibbles straight into the lanes (3 inserts for 4 rows, not 6).
// Every lane performs TokenTile's operations for its pair, so the bits are
// the same. Missing tokens are zero; rows past the range's end (a last group
// of 1-3 rows) repeat its last row and are not stored. (A layout with the
// rows transposed through memory instead, lane 4t + r, was slower: its
// 16-byte loads wait on the stores before them; bench/README.md,
// "Measurements behind the code", FourTokenTile.)

// [v0, v1, v2, v3] -> [v0 x4, v1 x4, v2 x4, v3 x4].
inline __m512i ExpandFour(__m128i v) {
  return _mm512_permutexvar_epi32(_mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0),
                                  _mm512_castsi128_si512(v));
}
inline __m512 ExpandFour(__m128 v) { return _mm512_castsi512_ps(ExpandFour(_mm_castps_si128(v))); }

// Where a block's 16 bytes of nibbles start (Q4_0, Q4_1; -1: other formats).
template <class F>
constexpr int kNibblesAt = std::is_same_v<F, Q4_0>   ? 2
                           : std::is_same_v<F, Q4_1> ? 4
                                                     : -1;

// vpshufd's control for group g % 4 of a 128-bit lane.
template <int g>
constexpr _MM_PERM_ENUM kPickGroup = static_cast<_MM_PERM_ENUM>((g % 4) * 0x55);

// out[t * out_stride + r] = dot(row r, token t) for r < 4 * G (r < rows when
// G == 1 and rows < 4) and t < nt (<= 4 * NG). Lane 4r + t of acc[k][n] is
// the pair (row 4k + r, token 4n + t). With NG = 2 the two groups of 4 tokens
// share each group of rows' lanes (the cross-lane work) and its vpshufd.
template <class F, int G, int NG>
void FourTokenTile(const uint8_t* w, size_t row_bytes, int64_t num_blocks, const XBlock<8>* x,
                   int nt, int rows, float* out, int64_t out_stride) {
  static_assert(kVnniFormat<F> || kHalvesFormat<F>);
  static_assert(NG == 1 || NG == 2);
  constexpr int R = 4 * G;
  const uint8_t* row_ptr[R];
  for (int r = 0; r < R; ++r) {
    row_ptr[r] = w + static_cast<size_t>(std::min(r, rows - 1)) * row_bytes;
  }
  __m512 acc[G][NG];
#pragma GCC unroll 4
  for (int k = 0; k < G; ++k) {
#pragma GCC unroll 2
    for (int n = 0; n < NG; ++n) acc[k][n] = _mm512_setzero_ps();
  }
  for (int64_t b = 0; b < num_blocks; ++b) {
    PrefetchAhead<R * F::kBlockBytes>(w, row_bytes, b);
    typename F::Header header[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) header[r] = F::Prepare(row_ptr[r] + b * F::kBlockBytes);
    for (int j = 0; j < F::kSubBlocks; ++j) {
      const XBlock<8>& xb = x[b * (F::kSubBlocks / Passes<F>()) + j / Passes<F>()];
      __m512i lo[G], hi[G];
      __m512 dw[G], mw[G];
      __m512i sub_lo[G], sub_hi[G];  // kHalvesFormat: the rows' sub-scales, [r0 x4, r1 x4, ...]
#pragma GCC unroll 4
      for (int k = 0; k < G; ++k) {
        __m128 dm[4];
        if constexpr (kNibblesAt<F> >= 0) {
          // Q4_0, Q4_1: the rows' 16 bytes of nibbles, one row per 128-bit
          // lane, split in place (3 lane inserts instead of 6 shuffles).
          const uint8_t* p[4];
#pragma GCC unroll 4
          for (int r = 0; r < 4; ++r) p[r] = header[4 * k + r] + kNibblesAt<F>;
          __m512i z =
              _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p[0])));
          z = _mm512_inserti32x4(z, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p[1])), 1);
          z = _mm512_inserti32x4(z, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p[2])), 2);
          z = _mm512_inserti32x4(z, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p[3])), 3);
          const __m512i nibble = _mm512_set1_epi8(0x0F);
          lo[k] = _mm512_and_si512(z, nibble);
          hi[k] = _mm512_and_si512(_mm512_srli_epi16(z, 4), nibble);
#pragma GCC unroll 4
          for (int r = 0; r < 4; ++r) dm[r] = F::Unpack(header[4 * k + r], j).dm;
        } else {
          __m256i u[4];
          int sl[4], sh[4];
#pragma GCC unroll 4
          for (int r = 0; r < 4; ++r) {
            const WeightBlock wb = F::Unpack(header[4 * k + r], j);
            u[r] = UnsignedLanes<F>(wb);
            dm[r] = wb.dm;
            if constexpr (kHalvesFormat<F>) {
              sl[r] = static_cast<int16_t>(_mm256_extract_epi16(wb.sub_scales, 0));
              sh[r] = static_cast<int16_t>(_mm256_extract_epi16(wb.sub_scales, 8));
            }
          }
          if constexpr (kHalvesFormat<F>) {
            sub_lo[k] = ExpandFour(_mm_setr_epi32(sl[0], sl[1], sl[2], sl[3]));
            sub_hi[k] = ExpandFour(_mm_setr_epi32(sh[0], sh[1], sh[2], sh[3]));
          }
          lo[k] = _mm512_inserti64x4(
              _mm512_castsi256_si512(_mm256_permute2x128_si256(u[0], u[1], 0x20)),
              _mm256_permute2x128_si256(u[2], u[3], 0x20), 1);
          hi[k] = _mm512_inserti64x4(
              _mm512_castsi256_si512(_mm256_permute2x128_si256(u[0], u[1], 0x31)),
              _mm256_permute2x128_si256(u[2], u[3], 0x31), 1);
        }
        const __m128 t01 = _mm_unpacklo_ps(dm[0], dm[1]);  // d0 d1 m0 m1
        const __m128 t23 = _mm_unpacklo_ps(dm[2], dm[3]);  // d2 d3 m2 m3
        dw[k] = ExpandFour(_mm_movelh_ps(t01, t23));
        if constexpr (F::kMin) mw[k] = ExpandFour(_mm_movehl_ps(t23, t01));
      }
      // Per group of rows and of tokens, two chains, so that enough products
      // are in flight: even and odd groups of elements, whose integer sum is
      // exact; for a kHalvesFormat groups 0-3 and 4-7 (elements 0..15 and
      // 16..31), each from -offset * its codes' sum, then times its sub-scale.
      __m512i even[G][NG], odd[G][NG];
#pragma GCC unroll 2
      for (int n = 0; n < NG; ++n) {
        auto tokens = [&](const int32_t* v) {
          return _mm512_broadcast_i32x4(
              _mm_load_si128(reinterpret_cast<const __m128i*>(v + 4 * n)));
        };
        __m512i start0 = _mm512_setzero_si512(), start1 = _mm512_setzero_si512();
        if constexpr (kVnniOffset<F> != 0 && kHalvesFormat<F>) {
          const __m512i lo_sum = tokens(xb.neg_sum_lo);
          start0 = _mm512_slli_epi32(lo_sum, kOffsetShift<F>);
          start1 = _mm512_slli_epi32(_mm512_sub_epi32(tokens(xb.neg_sum), lo_sum), kOffsetShift<F>);
        } else if constexpr (kVnniOffset<F> != 0) {
          start0 = _mm512_slli_epi32(tokens(xb.neg_sum), kOffsetShift<F>);
        }
#pragma GCC unroll 4
        for (int k = 0; k < G; ++k) {
          even[k][n] = start0;
          odd[k][n] = start1;
        }
      }
      [&]<int... g>(std::integer_sequence<int, g...>) {
        (
            [&] {
              __m512i xq[NG];
#pragma GCC unroll 2
              for (int n = 0; n < NG; ++n) {
                xq[n] = _mm512_broadcast_i32x4(
                    _mm_load_si128(reinterpret_cast<const __m128i*>(xb.q[g] + 16 * n)));
              }
#pragma GCC unroll 4
              for (int k = 0; k < G; ++k) {
                const __m512i ug = _mm512_shuffle_epi32(g < 4 ? lo[k] : hi[k], kPickGroup<g>);
#pragma GCC unroll 2
                for (int n = 0; n < NG; ++n) {
                  if constexpr (kHalvesFormat<F> ? g < 4 : g % 2 == 0) {
                    even[k][n] = _mm512_dpbusd_epi32(even[k][n], ug, xq[n]);
                  } else {
                    odd[k][n] = _mm512_dpbusd_epi32(odd[k][n], ug, xq[n]);
                  }
                }
              }
            }(),
            ...);
      }
      (std::make_integer_sequence<int, 8>{});
#pragma GCC unroll 2
      for (int n = 0; n < NG; ++n) {
        const __m512 xd = _mm512_broadcast_f32x4(_mm_load_ps(xb.d + 4 * n));
#pragma GCC unroll 4
        for (int k = 0; k < G; ++k) {
          __m512i sum;
          if constexpr (kHalvesFormat<F>) {
            sum = _mm512_add_epi32(_mm512_mullo_epi32(even[k][n], sub_lo[k]),
                                   _mm512_mullo_epi32(odd[k][n], sub_hi[k]));
          } else {
            sum = _mm512_add_epi32(even[k][n], odd[k][n]);
          }
          const __m512 isum = _mm512_cvtepi32_ps(sum);
          acc[k][n] = _mm512_fmadd_ps(_mm512_mul_ps(dw[k], xd), isum, acc[k][n]);
          if constexpr (F::kMin) {
            acc[k][n] = _mm512_fmadd_ps(mw[k], _mm512_broadcast_f32x4(_mm_load_ps(xb.s + 4 * n)),
                                        acc[k][n]);
          }
        }
      }
    }
  }
  // Lanes (r, t) -> per token t the 4 rows' outputs, adjacent.
  const __m512i by_token = _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
#pragma GCC unroll 4
  for (int k = 0; k < G; ++k) {
    const int valid = std::min(4, rows - 4 * k);
#pragma GCC unroll 2
    for (int n = 0; n < NG; ++n) {
      alignas(64) float lanes[16];
      _mm512_store_ps(lanes, _mm512_permutexvar_ps(by_token, acc[k][n]));
      for (int t = 4 * n; t < std::min(nt, 4 * n + 4); ++t) {
        const float* v = lanes + 4 * (t - 4 * n);
        float* o = out + t * out_stride + 4 * k;
        if (valid == 4) {
          _mm_storeu_ps(o, _mm_load_ps(v));
        } else {
          for (int r = 0; r < valid; ++r) o[r] = v[r];
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Driver.

// Scratch for interleaved activations: grows to the largest call, then stays.
template <int T>
std::vector<XBlock<T>>& InterleaveScratch() {
  thread_local std::vector<XBlock<T>> scratch;
  return scratch;
}

template <int T>
XBlock<T>* Interleave(const BlockQ8* const* xs, int64_t count, int64_t num_groups,
                      int64_t num_xblocks) {
  std::vector<XBlock<T>>& scratch = InterleaveScratch<T>();
  if (scratch.size() < static_cast<size_t>(num_groups * num_xblocks)) {
    scratch.resize(num_groups * num_xblocks);
  }
  for (int64_t g = 0; g < num_groups; ++g) {
    const int cnt = static_cast<int>(std::min<int64_t>(T, count - T * g));
    InterleaveTokens<T>(xs + T * g, cnt, num_xblocks, scratch.data() + g * num_xblocks);
  }
  return scratch.data();
}

// The tokens the thread laid out last, in a SameActivationsScope (scope 0:
// none), and where: one record for every weight type, as the scratch is.
struct Layout {
  uint64_t scope = 0;
  const ActRow* x = nullptr;
  int64_t num_tokens = 0, num_xblocks = 0;
  const XBlock<16>* x16 = nullptr;
  const XBlock<8>* x8 = nullptr;  // FourTokenTile's 2-8 tokens
};
Layout& LastLayout() {
  thread_local Layout last;
  return last;
}

// Tokens go in groups of 16 (zmm); a remainder of 9..15 fills one more
// padded group of 16, one of 2..8 a FourTokenTile (two groups of 4 tokens
// for 5-8; for 2 tokens too, where it is faster than the AVX2 kernels'
// two-token tile: bench/README.md, "Measurements behind the code"), and a
// single token the AVX2
// kernels' RowTokenTile (memory-bound decode). Every path gives the same bits
// (batch invariance).
template <class F>
void QuantMatMul(TensorType type, const uint8_t* w, size_t row_bytes, int64_t n, int64_t r0,
                 int64_t r1, const ActRow* x, int64_t num_tokens, float* out, int64_t out_stride) {
  const int64_t num_blocks = n / (32 * F::kSubBlocks / Passes<F>());
  const int64_t num_xblocks = n / 32;
  for (int64_t t0 = 0; t0 < num_tokens; t0 += kTokenBatch) {
    const int64_t nt = std::min(kTokenBatch, num_tokens - t0);
    float* const o = out + t0 * out_stride;
    const int64_t rem = nt % 16;
    const int64_t n16 = nt / 16 + (rem > 8 ? 1 : 0);
    const int64_t in16 = std::min(nt, 16 * n16);         // tokens in the groups of 16
    const int64_t in4 = rem >= 2 && rem <= 8 ? rem : 0;  // tokens of the FourTokenTile
    const int64_t tail = nt - in16 - in4;                // 0 or 1
    if (n16 == 0 && in4 == 0) {
      MatMulTileAvx2(type, w, row_bytes, n, r0, r1, x + t0, nt, o, out_stride);
      continue;
    }
    if (t0 == 0) {
      // The first rows, which no tile prefetches, load while the tokens are
      // interleaved.
      const size_t begin = static_cast<size_t>(r0) * row_bytes;
      const size_t end = static_cast<size_t>(std::min<int64_t>(r1, r0 + kPrefetchRows)) * row_bytes;
      for (size_t off = begin; off < end; off += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(w + off), _MM_HINT_T0);
      }
    }
    const BlockQ8* xs[kTokenBatch];
    for (int64_t t = 0; t < nt; ++t) xs[t] = x[t0 + t].q8;
    // In a SameActivationsScope, the layout of the thread's last call serves
    // again when it was of the same tokens (x, count and width).
    Layout& last = LastLayout();
    const uint64_t scope = nt == num_tokens ? CurrentActivationsScope() : 0;
    if (scope == 0 || last.scope != scope || last.x != x || last.num_tokens != num_tokens ||
        last.num_xblocks != num_xblocks) {
      last = {scope,
              x,
              num_tokens,
              num_xblocks,
              n16 > 0 ? Interleave<16>(xs, in16, n16, num_xblocks) : nullptr,
              in4 > 0 ? Interleave<8>(xs + in16, in4, 1, num_xblocks) : nullptr};
    }
    const XBlock<16>* x16 = last.x16;
    const XBlock<8>* x8 = last.x8;
    // Chunks of whole FourTokenTile tiles (16 rows with one group of tokens).
    const int64_t chunk = ChunkRows<16>(row_bytes);
    for (int64_t rc = r0; rc < r1; rc += chunk) {
      const int64_t rc_end = std::min(r1, rc + chunk);
      for (int64_t g = 0; g < n16; ++g) {
        const int cnt = static_cast<int>(std::min<int64_t>(16, in16 - 16 * g));
        ForRowTiles<8, 4, 1>(rc, rc_end, [&]<int R>(int64_t r) {
          TokenTile<F, R, V16>(w + static_cast<size_t>(r) * row_bytes, row_bytes, num_blocks,
                               x16 + g * num_xblocks, cnt, o + 16 * g * out_stride + r, out_stride);
        });
      }
      if (in4 > 0) {
        // 5-8 tokens: two groups of 4 (rows 8 at a time, for the registers);
        // 2-4 tokens: one (rows 16 at a time).
        const int cnt = static_cast<int>(in4);
        float* const o8 = o + in16 * out_stride;
        auto tiles = [&]<int kG, int kNG>() {
          int64_t r = rc;
          for (; r + 4 * kG <= rc_end; r += 4 * kG) {
            FourTokenTile<F, kG, kNG>(w + static_cast<size_t>(r) * row_bytes, row_bytes, num_blocks,
                                      x8, cnt, 4 * kG, o8 + r, out_stride);
          }
          for (; r < rc_end; r += 4) {
            FourTokenTile<F, 1, kNG>(w + static_cast<size_t>(r) * row_bytes, row_bytes, num_blocks,
                                     x8, cnt, static_cast<int>(std::min<int64_t>(4, rc_end - r)),
                                     o8 + r, out_stride);
          }
        };
        if (in4 > 4) {
          tiles.template operator()<2, 2>();
        } else {
          tiles.template operator()<4, 1>();
        }
      }
      if (tail > 0) {
        MatMulTileAvx2(type, w, row_bytes, n, rc, rc_end, x + t0 + in16 + in4, tail,
                       o + (in16 + in4) * out_stride, out_stride);
      }
    }
  }
}

}  // namespace

// ---------------------------------------------------------------------------
// Entry points.

void MatMulTileAvx512Vnni(TensorType type, const uint8_t* w, size_t row_bytes, int64_t n,
                          int64_t r0, int64_t r1, const ActRow* x, int64_t num_tokens, float* out,
                          int64_t out_stride) {
  if (num_tokens == 1) {
    const int64_t done = MatVecAvx512Vnni(type, w, row_bytes, n, r0, r1, x[0].q8, out);
    if (done == r1 - r0) return;
    r0 += done;
  }
  switch (type) {
#define LLM_QUANT_CASE(F, block_elements) \
  case TensorType::k##F:                  \
    return QuantMatMul<F>(type, w, row_bytes, n, r0, r1, x, num_tokens, out, out_stride);
    LLM_QUANT_WEIGHT_FORMATS(LLM_QUANT_CASE)
#undef LLM_QUANT_CASE
    default:  // the float types
      return MatMulTileAvx2(type, w, row_bytes, n, r0, r1, x, num_tokens, out, out_stride);
  }
}

void QuantizeQ8Avx512(const float* x, BlockQ8* out, int64_t n) {
  const __m512 lo = _mm512_set1_ps(-127.0f), hi = _mm512_set1_ps(127.0f);
  const int64_t num_blocks = n / kQ8Block;
  for (int64_t b0 = 0; b0 < num_blocks; b0 += 16) {
    const int64_t count = std::min<int64_t>(16, num_blocks - b0);
    // The maxima as QuantizeQ8Avx2 takes them (BlockAbsMax, so that a
    // NaN fares alike), then d and 1/d for 16 blocks at a time.
    alignas(64) float amax[16] = {};
    for (int64_t j = 0; j < count; ++j) amax[j] = BlockAbsMax(x + (b0 + j) * kQ8Block);
    const __m512 d16 = _mm512_div_ps(_mm512_load_ps(amax), _mm512_set1_ps(127.0f));
    const __m512 id16 = _mm512_maskz_div_ps(
        _mm512_cmp_ps_mask(d16, _mm512_setzero_ps(), _CMP_NEQ_OQ), _mm512_set1_ps(1.0f), d16);
    alignas(64) float ds[16], ids[16];
    _mm512_store_ps(ds, d16);
    _mm512_store_ps(ids, id16);
    // The codes: 16 lanes per operation instead of 8, each lane as in AVX2
    // (max(v, lo) returns lo for NaN there too), packed with saturation
    // (the codes are within +-127 already).
    for (int64_t j = 0; j < count; ++j) {
      const float* xb = x + (b0 + j) * kQ8Block;
      const __m512 idv = _mm512_set1_ps(ids[j]);
      __m512i q[2];
      for (int i = 0; i < 2; ++i) {
        const __m512 c =
            _mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(_mm512_loadu_ps(xb + 16 * i), idv), lo), hi);
        q[i] = _mm512_cvtps_epi32(
            _mm512_roundscale_ps(c, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
      }
      BlockQ8& ob = out[b0 + j];
      _mm_storeu_si128(reinterpret_cast<__m128i*>(ob.q), _mm512_cvtsepi32_epi8(q[0]));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(ob.q + 16), _mm512_cvtsepi32_epi8(q[1]));
      ob.d = ds[j];
      ob.s = ds[j] * static_cast<float>(_mm512_reduce_add_epi32(_mm512_add_epi32(q[0], q[1])));
    }
  }
}

float DotRowAvx512Vnni(TensorType type, const void* w, const ActRow& x, int64_t n) {
  float out = 0.0f;
  MatMulTileAvx512Vnni(type, static_cast<const uint8_t*>(w), 0, n, 0, 1, &x, 1, &out, 1);
  return out;
}

}  // namespace llm::kernels::internal
