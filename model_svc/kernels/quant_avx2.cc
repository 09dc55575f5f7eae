// AVX2+FMA kernels. This file is compiled with -mavx2 -mfma -mf16c
// -ffp-contract=off; nothing in it may run before quant.cc has checked
// CpuHasAvx2Fma().
//
// Batch invariance. Every kernel here computes each (row, token) result with
// exactly the fp32 operations of the canonical order in quant.h (the scalar
// code's), so the result does not depend on the tile shape, the number of
// tokens in the call, the row range or the other tokens. Kernels vectorize
// across rows and tokens only: a vector lane always holds one (row, token)
// pair, and no float sum is ever split or reassociated across blocks. Integer
// sums within a block are exact, so their order is free.
//
// Quantized weights. Every format has one small Unpack helper
// (quant_x86_formats.h) that turns a 32-element block into 32 int8 lanes plus
// float scales (a WeightBlock). Two generic tile loops use it:
//
//  * RowTokenTile (decode, and 1-2 leftover tokens): 8 rows x 1 token or
//    4 rows x 2 tokens, one (row, token) pair per lane of one __m256 (and
//    OneRowTile for the rows left over). Per block and pair, vpmaddubsw +
//    vpmaddwd give 8 int32 partial sums; a tree of blends and shuffles over
//    the 8 pairs reduces them to the exact block sums, one per lane, and the
//    float step of the block runs once for all lanes. It prefetches the
//    weights as a single sequential stream.
//
//  * Token8Tile (prefill, 3 or more tokens): R rows x 8 tokens. The
//    activations of 8 tokens are first interleaved (XBlock8, once per call)
//    so that one 32-byte load holds elements 4g..4g+3 of all 8 tokens; each
//    group of 4 weights is broadcast to all lanes, and lane t of the integer
//    sums belongs to token t. The int16 sums of vpmaddubsw are added over
//    several groups before one vpmaddwd, and the float step of the block runs
//    once per row for all 8 tokens: for 4-bit weights a (row, token, block)
//    costs about 4 instructions. It prefetches the weights too (a large
//    matrix such as the LM head streams from DRAM).
//
// Cost model for callers: each MatMulTile call with 3 or more tokens
// interleaves its tokens' q8 activations (about 60 instructions per 8 tokens
// and 32 columns), so such calls should cover many rows (~64 or more).
//
// Products never saturate: vpmaddubsw pairs are at most 2 * 15 * 127 = 3810
// (4-bit), 2 * 31 * 127 = 7874 (5-bit), 2 * 32 * 127 = 8128 (Q6_K, via the
// sign trick; Q3_K: 2 * 7 * 127, Q2_K: 2 * 3 * 127) and 2 * 128 * 127 =
// 32512 (Q8_0; IQ4_NL/IQ4_XS: 2 * 127 * 127); kGroupsPerMadd bounds the
// int16 sums of several groups by 32767 (8 x 3810, 4 x 7874, 4 x 8128, 1 x
// 32512). In RowTokenTile the int16 products of Q4_0/Q5_0 with their
// offset taken off stay within 2 * 8 * 127 and 2 * 16 * 127, and PairSums
// adds two products of the formats with kGroupsPerMadd >= 2 (at most
// 2 * 8128) before vpmaddwd.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "common/half.h"
#include "model_svc/formats/weight_formats.h"
#include "model_svc/kernels/quant_internal.h"
#include "model_svc/kernels/quant_x86_formats.h"
#include "model_svc/kernels/tile_drivers.h"
#include "model_svc/kernels/x86_simd.h"

namespace llm::kernels::internal {
namespace {

// ---------------------------------------------------------------------------
// Small helpers (the block formats are in quant_x86_formats.h).

// Sum of the 8 lanes in the fixed tree of the canonical order (quant.h).
using x86::HorizontalSum;

// ---------------------------------------------------------------------------
// RowTokenTile: 8 (row, token) pairs in the lanes of one __m256, as 8 rows x
// 1 token (decode) or 4 rows x 2 tokens; OneRowTile: 1 row x 1-2 tokens.
//
// Per block, each pair gets 8 int32 partial sums, which a reduction tree of
// blends and in-lane shuffles (fewer shuffle-port uops than vphaddd) turns
// into the exact block sums, one per lane; then the float step of the block
// runs once for all lanes.
//
// The tree's first level takes the pairs two at a time, in "slots" of two
// rows (2k, 2k + 1) and one token; slot i ends in lanes 2i and 2i + 1. With
// 8 rows, row pairs k = 0, 1, 2, 3 go to slots 0, 2, 1, 3 (lanes hold rows
// 0 1 4 5 2 3 6 7), the order in which vcvtph2ps + vshufps deliver the rows'
// scales; with 4 rows x 2 tokens, row pair k and token t go to slot 2k + t.

// The int16 products of one block of row `wb` with one token's codes `xq`:
// pairwise sums of q * x (or of (q - kOffset) * x, given xoff =
// vpmaddubsw(kOffset, xq)).
template <class F>
inline __m256i BlockProducts16(const WeightBlock& wb, __m256i xq, __m256i xoff) {
  __m256i p16;
  if constexpr (F::kSigned) {
    p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(wb.q, wb.q), _mm256_sign_epi8(xq, wb.q));
  } else {
    p16 = _mm256_maddubs_epi16(wb.q, xq);
  }
  if constexpr (F::kOffset != 0) p16 = _mm256_sub_epi16(p16, xoff);
  return p16;
}

// Level 1 of the tree: the int32 partial sums of rows a and b (8 lanes each)
// as [a b a b | a b a b], each lane a sum of 2 of theirs.
inline __m256i FoldPairs(__m256i a, __m256i b) {
  const __m256i x = _mm256_blend_epi32(a, b, 0xAA);
  const __m256i y = _mm256_shuffle_epi32(_mm256_blend_epi32(a, b, 0x55), 0xB1);
  return _mm256_add_epi32(x, y);
}

// FoldPairs of two rows' block products. Formats whose int16 products of two
// groups fit (kGroupsPerMadd >= 2) fold before vpmaddwd, which then serves
// both rows (with the rows' sub-scales blended the same way).
template <class F>
inline __m256i PairSums(const WeightBlock& wa, const WeightBlock& wb, __m256i xq, __m256i xoff) {
  const __m256i a = BlockProducts16<F>(wa, xq, xoff), b = BlockProducts16<F>(wb, xq, xoff);
  if constexpr (F::kGroupsPerMadd >= 2) {
    const __m256i x = _mm256_blend_epi32(a, b, 0xAA);
    const __m256i y = _mm256_shuffle_epi32(_mm256_blend_epi32(a, b, 0x55), 0xB1);
    const __m256i scales = _mm256_blend_epi32(wa.sub_scales, wb.sub_scales, 0xAA);
    return _mm256_madd_epi16(_mm256_add_epi16(x, y), scales);
  } else {
    return FoldPairs(_mm256_madd_epi16(a, wa.sub_scales), _mm256_madd_epi16(b, wb.sub_scales));
  }
}

// Levels 2 and 3: the slots' level-1 sums s[0..3] -> lane 2i + j holds the
// whole block sum of row j of slot i.
inline __m256i SumSlots(const __m256i* s) {
  // [s0 s0 s1 s1 | s0 s0 s1 s1] (rows of each slot), each a sum of 4 lanes.
  auto fold64 = [](__m256i c, __m256i d) {
    const __m256i x = _mm256_blend_epi32(c, d, 0xCC);
    const __m256i y = _mm256_shuffle_epi32(_mm256_blend_epi32(c, d, 0x33), 0x4E);
    return _mm256_add_epi32(x, y);
  };
  const __m256i e = fold64(s[0], s[1]), f = fold64(s[2], s[3]);
  // [e.lo + e.hi | f.lo + f.hi].
  return _mm256_add_epi32(_mm256_blend_epi32(e, f, 0xF0), _mm256_permute2x128_si256(e, f, 0x21));
}

// The codes' sums S_lo (elements 0..15) and S_hi (16..31) of a token's
// block as the int16 pair (S_lo, S_hi) in every int32 lane (|S| <= 16 * 127).
inline __m256i HalfSumPairs(__m256i xq) {
  __m256i s =
      _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), xq), _mm256_set1_epi16(1));
  s = _mm256_add_epi32(s, _mm256_shuffle_epi32(s, 0x4E));
  s = _mm256_add_epi32(s, _mm256_shuffle_epi32(s, 0xB1));  // [S_lo x4 | S_hi x4]
  const __m256i hi = _mm256_permute2x128_si256(s, s, 0x01);
  const __m256i pair =
      _mm256_or_si256(_mm256_and_si256(s, _mm256_set1_epi32(0xFFFF)), _mm256_slli_epi32(hi, 16));
  return _mm256_broadcastd_epi32(_mm256_castsi256_si128(pair));
}

// Tree slot of row pair k and token t in RowTokenTile<F, R, T>.
template <int R>
constexpr int PairSlot(int k, int t) {
  return R == 8 ? (k & 1) * 2 + (k >> 1) : 2 * k + t;
}

// The weight scales d and mins m of the lanes of RowTokenTile<F, R, T>, from
// the fp16 [d, m] words at the starts of the rows' blocks (formats with
// kHalfHeader; m is garbage for the others and unused).
template <int R>
inline void HalfHeaderScales(const uint8_t* const* blocks, __m256* d, __m256* m) {
  auto four = [&](int r) {  // rows r..r+3: [d m d m | d m d m] after vcvtph2ps
    const __m128i lo =
        _mm_unpacklo_epi32(_mm_cvtsi32_si128(static_cast<int>(LoadU32(blocks[r]))),
                           _mm_cvtsi32_si128(static_cast<int>(LoadU32(blocks[r + 1]))));
    const __m128i hi =
        _mm_unpacklo_epi32(_mm_cvtsi32_si128(static_cast<int>(LoadU32(blocks[r + 2]))),
                           _mm_cvtsi32_si128(static_cast<int>(LoadU32(blocks[r + 3]))));
    return _mm256_cvtph_ps(_mm_unpacklo_epi64(lo, hi));
  };
  const __m256 a = four(0);
  const __m256 b = R == 8 ? four(4) : a;
  *d = _mm256_shuffle_ps(a, b, 0x88);  // R = 8: rows 0 1 4 5 | 2 3 6 7
  *m = _mm256_shuffle_ps(a, b, 0xDD);
}

// The same from the rows' unpacked [d, m, -, -] (formats without kHalfHeader).
template <int R>
inline void UnpackedScales(const __m128* dm, __m256* d, __m256* m) {
  const __m256 x = _mm256_set_m128(_mm_unpacklo_ps(dm[2], dm[3]), _mm_unpacklo_ps(dm[0], dm[1]));
  __m256 y = x;
  if constexpr (R == 8) {
    y = _mm256_set_m128(_mm_unpacklo_ps(dm[6], dm[7]), _mm_unpacklo_ps(dm[4], dm[5]));
  }
  *d = _mm256_shuffle_ps(x, y, 0x44);
  *m = _mm256_shuffle_ps(x, y, 0xEE);
}

// v0 (token 0) and v1 (token 1) in the lanes of their tokens: R = 8 has one
// token; with 4 rows x 2 tokens, slot i is token i % 2.
template <int R>
inline __m256 TokenLanes(const float* v0, const float* v1) {
  if constexpr (R == 8) return _mm256_broadcast_ss(v0);
  return _mm256_blend_ps(_mm256_broadcast_ss(v0), _mm256_broadcast_ss(v1), 0xCC);
}

// Prefetches what the tiles' own prefetching will not cover of rows
// [r_begin, r_end): the rows from the second tile (of `rows_per_tile`) up to
// the first tile's prefetch distance.
inline void PrefetchLeadIn(const uint8_t* w, size_t row_bytes, int64_t r_begin, int64_t r_end,
                           int rows_per_tile) {
  const size_t begin = static_cast<size_t>(r_begin + rows_per_tile) * row_bytes;
  const size_t end = std::min(static_cast<size_t>(r_begin) * row_bytes + kPrefetchRows * row_bytes,
                              static_cast<size_t>(r_end) * row_bytes);
  for (size_t off = begin; off < end; off += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(w + off), _MM_HINT_T0);
  }
}

// out[t * out_stride + r] = dot(row r, token t) for r < R, t < T, where row r
// starts at w + r * row_bytes and xs[t] are the q8 activations of token t;
// (R, T) is (8, 1) or (4, 2). Per block: the 8 pairs' exact block sums
// (PairSums, SumSlots), then for all lanes at once the canonical float step
// acc = fma(d * x.d, isum, acc) [, acc = fma(m, x.s, acc)].
template <class F, int R, int T>
void RowTokenTile(const uint8_t* w, size_t row_bytes, int64_t num_blocks, const BlockQ8* const* xs,
                  float* out, int64_t out_stride) {
  static_assert(R * T == 8 && (T == 1 || T == 2));
  const BlockQ8* const x1 = xs[T - 1];  // the second token, or the first again
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < num_blocks; ++b) {
    PrefetchAhead<R * F::kBlockBytes>(w, row_bytes, b);
    const uint8_t* block[R];
    typename F::Header header[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      block[r] = w + static_cast<size_t>(r) * row_bytes + b * F::kBlockBytes;
      header[r] = F::Prepare(block[r]);
    }
    // Unrolled for the K-quants: shifts and scale positions become constants.
#pragma GCC unroll 8
    for (int j = 0; j < F::kSubBlocks; ++j) {
      const int64_t xb = b * (F::kSubBlocks / Passes<F>()) + j / Passes<F>();
      const __m256i xq0 = LoadBytes32(xs[0][xb].q), xq1 = LoadBytes32(x1[xb].q);
      __m256i xoff0 = _mm256_setzero_si256(), xoff1 = _mm256_setzero_si256();
      if constexpr (F::kOffset != 0) {
        const __m256i offset = _mm256_set1_epi8(F::kOffset);
        xoff0 = _mm256_maddubs_epi16(offset, xq0);
        xoff1 = _mm256_maddubs_epi16(offset, xq1);
      }
      if constexpr (Passes<F>() == 2) {
        if ((j & 1) != 0) {
          // Q2_K's min step: mn_lo * S_lo + mn_hi * S_hi per lane, with the
          // token's code sums S of the halves as one int16 pair, and the
          // rows' (mn_lo, mn_hi) pairs blended into their lanes.
          const __m256i p0 = HalfSumPairs(xq0);
          const __m256i p = T == 2 ? _mm256_blend_epi32(p0, HalfSumPairs(xq1), 0xCC) : p0;
          auto mp = [&](int r) { return F::MinPairs(header[r], j); };
          __m256i m;
          if constexpr (R == 8) {  // lanes hold rows 0 1 4 5 2 3 6 7
            m = _mm256_blend_epi32(mp(0), mp(1), 0x02);
            m = _mm256_blend_epi32(m, mp(4), 0x04);
            m = _mm256_blend_epi32(m, mp(5), 0x08);
            m = _mm256_blend_epi32(m, mp(2), 0x10);
            m = _mm256_blend_epi32(m, mp(3), 0x20);
            m = _mm256_blend_epi32(m, mp(6), 0x40);
            m = _mm256_blend_epi32(m, mp(7), 0x80);
          } else {  // rows 0 1 0 1 2 3 2 3 (tokens 0 0 1 1 0 0 1 1)
            m = _mm256_blend_epi32(mp(0), mp(1), 0x0A);
            m = _mm256_blend_epi32(m, mp(2), 0x50);
            m = _mm256_blend_epi32(m, mp(3), 0xA0);
          }
          const __m256 isum = _mm256_cvtepi32_ps(_mm256_madd_epi16(p, m));
          __m128 dm[R];
#pragma GCC unroll 8
          for (int r = 0; r < R; ++r) dm[r] = F::MinScale(header[r]);
          __m256 d, unused;
          UnpackedScales<R>(dm, &d, &unused);
          const __m256 scale = _mm256_mul_ps(d, TokenLanes<R>(&xs[0][xb].d, &x1[xb].d));
          acc = _mm256_fmadd_ps(scale, isum, acc);
          continue;
        }
      }
      __m256i slots[4];
      __m128 dm[R];
#pragma GCC unroll 4
      for (int k = 0; k < R / 2; ++k) {
        const WeightBlock w0 = F::Unpack(header[2 * k], j);
        const WeightBlock w1 = F::Unpack(header[2 * k + 1], j);
        dm[2 * k] = w0.dm;
        dm[2 * k + 1] = w1.dm;
        slots[PairSlot<R>(k, 0)] = PairSums<F>(w0, w1, xq0, xoff0);
        if constexpr (T == 2) slots[PairSlot<R>(k, 1)] = PairSums<F>(w0, w1, xq1, xoff1);
      }
      const __m256 isum = _mm256_cvtepi32_ps(SumSlots(slots));
      __m256 d, m;
      if constexpr (F::kHalfHeader) {
        HalfHeaderScales<R>(block, &d, &m);
      } else {
        UnpackedScales<R>(dm, &d, &m);
      }
      const __m256 scale = _mm256_mul_ps(d, TokenLanes<R>(&xs[0][xb].d, &x1[xb].d));
      acc = _mm256_fmadd_ps(scale, isum, acc);
      if constexpr (F::kMin) acc = _mm256_fmadd_ps(m, TokenLanes<R>(&xs[0][xb].s, &x1[xb].s), acc);
    }
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, acc);
#pragma GCC unroll 4
  for (int k = 0; k < R / 2; ++k) {
#pragma GCC unroll 2
    for (int t = 0; t < T; ++t) {
      const int slot = PairSlot<R>(k, t);
      out[t * out_stride + 2 * k] = lanes[2 * slot];
      out[t * out_stride + 2 * k + 1] = lanes[2 * slot + 1];
    }
  }
}

// One row x T tokens (T = 1 or 2), for the rows RowTokenTile leaves over: the
// same steps, with lane 0 for token 0 and lane 1 for token 1.
template <class F, int T>
void OneRowTile(const uint8_t* w, int64_t num_blocks, const BlockQ8* const* xs, float* out,
                int64_t out_stride) {
  static_assert(T == 1 || T == 2);
  const BlockQ8* const x1 = xs[T - 1];
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < num_blocks; ++b) {
    const typename F::Header header = F::Prepare(w + b * F::kBlockBytes);
#pragma GCC unroll 8
    for (int j = 0; j < F::kSubBlocks; ++j) {
      const int64_t xb = b * (F::kSubBlocks / Passes<F>()) + j / Passes<F>();
      const __m256i xq0 = LoadBytes32(xs[0][xb].q), xq1 = LoadBytes32(x1[xb].q);
      __m256i xoff0 = _mm256_setzero_si256(), xoff1 = _mm256_setzero_si256();
      if constexpr (F::kOffset != 0) {
        const __m256i offset = _mm256_set1_epi8(F::kOffset);
        xoff0 = _mm256_maddubs_epi16(offset, xq0);
        xoff1 = _mm256_maddubs_epi16(offset, xq1);
      }
      const WeightBlock wb = F::Unpack(header, j);
      const __m256i p0 = _mm256_madd_epi16(BlockProducts16<F>(wb, xq0, xoff0), wb.sub_scales);
      const __m256i p1 = _mm256_madd_epi16(BlockProducts16<F>(wb, xq1, xoff1), wb.sub_scales);
      // [t0 t1 t0 t1 | ...] partials, then the whole sums in every lane pair.
      __m256i s = FoldPairs(p0, p1);
      s = _mm256_add_epi32(s, _mm256_shuffle_epi32(s, 0x4E));
      s = _mm256_add_epi32(s, _mm256_permute2x128_si256(s, s, 0x01));
      const __m256 isum = _mm256_cvtepi32_ps(s);
      const __m256 d = _mm256_broadcastss_ps(wb.dm);
      const __m256 xd =
          _mm256_blend_ps(_mm256_broadcast_ss(&xs[0][xb].d), _mm256_broadcast_ss(&x1[xb].d), 0xAA);
      acc = _mm256_fmadd_ps(_mm256_mul_ps(d, xd), isum, acc);
      if constexpr (F::kMin) {
        const __m256 m = _mm256_broadcastss_ps(_mm_movehdup_ps(wb.dm));
        const __m256 xsum = _mm256_blend_ps(_mm256_broadcast_ss(&xs[0][xb].s),
                                            _mm256_broadcast_ss(&x1[xb].s), 0xAA);
        acc = _mm256_fmadd_ps(m, xsum, acc);
      }
    }
  }
  out[0] = _mm256_cvtss_f32(acc);
  if constexpr (T == 2) {
    out[out_stride] = _mm_cvtss_f32(_mm_movehdup_ps(_mm256_castps256_ps128(acc)));
  }
}

// ---------------------------------------------------------------------------
// Token8Tile: R rows x 8 interleaved tokens.

// One 32-element block of 8 tokens' activations, interleaved: q[g] holds
// elements 4g..4g+3 of token 0, then of token 1, ... (4 bytes each). Missing
// tokens of a partial group are zero.
struct XBlock8 {
  int8_t q[8][32];
  float d[8];
  float s[8];
};
static_assert(sizeof(XBlock8) == 320);

// With the tokens' sum(q), for the formats with a kOffset.
struct XBlock8Sums : XBlock8 {
  int32_t sum[8];
};
static_assert(sizeof(XBlock8Sums) == 352);

// The interleaved blocks format F reads.
template <class F>
using XBlockFor = std::conditional_t<F::kOffset != 0, XBlock8Sums, XBlock8>;

// Interleaves block b of tokens xs[0..nt) (nt <= 8) for every b < num_blocks
// (X = XBlock8Sums: with the sums).
template <class X>
void InterleaveTokens(const BlockQ8* const* xs, int nt, int64_t num_blocks, X* out) {
  static constexpr BlockQ8 kZero = {};
  const BlockQ8* x[8];
  for (int t = 0; t < 8; ++t) x[t] = t < nt ? xs[t] : &kZero;
  const int64_t step[8] = {x[0] != &kZero, x[1] != &kZero, x[2] != &kZero, x[3] != &kZero,
                           x[4] != &kZero, x[5] != &kZero, x[6] != &kZero, x[7] != &kZero};
  for (int64_t b = 0; b < num_blocks; ++b, ++out) {
    __m256 g[8];  // group g: dword t = token t's elements 4g..4g+3
    TransposeGroups8(x, g);
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out->q[i]), _mm256_castps_si256(g[i]));
    }
    if constexpr (std::is_same_v<X, XBlock8Sums>) {
      // Dword lane t of every group belongs to token t: pairwise int16 sums
      // of the 8 groups (at most 8 * 2 * 127), then their dword sums.
      const __m256i ones = _mm256_set1_epi8(1);
      __m256i sum16 = _mm256_setzero_si256();
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) {
        sum16 = _mm256_add_epi16(sum16, _mm256_maddubs_epi16(ones, _mm256_castps_si256(g[i])));
      }
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out->sum),
                          _mm256_madd_epi16(sum16, _mm256_set1_epi16(1)));
    }
    __m256 d, s;
    LoadScales8(x, &d, &s);
    _mm256_storeu_ps(out->d, d);
    _mm256_storeu_ps(out->s, s);
#pragma GCC unroll 8
    for (int t = 0; t < 8; ++t) x[t] += step[t];
  }
}

// An empty asm that "modifies" v: GCC cannot reassociate a chain of integer
// adds through it. Without it, it rebalances the chains below into trees
// whose partial products no longer fit in registers and spill to the stack.
inline __m256i KeepOrder(__m256i v) {
  asm("" : "+x"(v));
  return v;
}

// The 4 weights of group g, in every dword lane.
inline __m256i BroadcastGroup(const uint8_t* lanes, int g) {
  return _mm256_set1_epi32(static_cast<int>(LoadU32(lanes + 4 * g)));
}

// out[t * out_stride + r] = dot(row r, token t) for r < R and t < nt (<= 8).
// Lane t of acc[r] is the pair (row r, token t); per block it takes the
// canonical float step acc = fma(d * x.d, isum, acc) [, fma(m, x.s, acc)].
template <class F, int R>
void Token8Tile(const uint8_t* w, size_t row_bytes, int64_t num_blocks, const XBlockFor<F>* x,
                int nt, float* out, int64_t out_stride) {
  constexpr int G = F::kGroupsPerMadd;
  __m256 acc[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < num_blocks; ++b) {
    // A large matrix (the LM head) streams from DRAM.
    PrefetchAhead<R * F::kBlockBytes>(w, row_bytes, b);
    typename F::Header header[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      header[r] = F::Prepare(w + static_cast<size_t>(r) * row_bytes + b * F::kBlockBytes);
    }
    for (int j = 0; j < F::kSubBlocks; ++j) {
      const XBlockFor<F>& xb = x[b * (F::kSubBlocks / Passes<F>()) + j / Passes<F>()];
      if constexpr (Passes<F>() == 2) {
        if ((j & 1) != 0) {
          // Q2_K's min step: its integer sum is mn_lo * S_lo + mn_hi * S_hi
          // with the tokens' code sums S of the halves, formed once for all
          // rows as int16 pairs (|S| <= 16 * 127), then one vpmaddwd a row.
          __m256i half16[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
#pragma GCC unroll 8
          for (int g = 0; g < 8; ++g) {
            half16[g / 4] = _mm256_add_epi16(
                half16[g / 4], _mm256_maddubs_epi16(_mm256_set1_epi8(1), LoadBytes32(xb.q[g])));
          }
          const __m256i s_lo = _mm256_madd_epi16(half16[0], _mm256_set1_epi16(1));
          const __m256i s_hi = _mm256_madd_epi16(half16[1], _mm256_set1_epi16(1));
          const __m256i pairs = _mm256_or_si256(_mm256_and_si256(s_lo, _mm256_set1_epi32(0xFFFF)),
                                                _mm256_slli_epi32(s_hi, 16));
          const __m256 xd = _mm256_loadu_ps(xb.d);
#pragma GCC unroll 16
          for (int r = 0; r < R; ++r) {
            const __m256i msum = _mm256_madd_epi16(pairs, F::MinPairs(header[r], j));
            const __m256 scale = _mm256_mul_ps(_mm256_broadcastss_ps(F::MinScale(header[r])), xd);
            acc[r] = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(msum), acc[r]);
          }
          continue;
        }
      }
      // Unpacked lanes go through memory so that each group is one broadcast load.
      alignas(32) uint8_t u[R][32];     // vpmaddubsw's unsigned operand
      alignas(32) uint8_t sign[R][32];  // signed formats: the signs of q
      WeightBlock wb[R];
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        wb[r] = F::Unpack(header[r], j);
        if constexpr (F::kSigned) {
          _mm256_store_si256(reinterpret_cast<__m256i*>(u[r]), _mm256_sign_epi8(wb[r].q, wb[r].q));
          _mm256_store_si256(reinterpret_cast<__m256i*>(sign[r]), wb[r].q);
        } else {
          _mm256_store_si256(reinterpret_cast<__m256i*>(u[r]), wb[r].q);
        }
      }
      // The lanes stay in memory (the asm may read them): otherwise GCC turns
      // each broadcast load into two shuffles, on the ports the products need.
      asm volatile("" : : "r"(u), "r"(sign) : "memory");
      __m256i sum[R];
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) sum[r] = _mm256_setzero_si256();
#pragma GCC unroll 8
      for (int g0 = 0; g0 < 8; g0 += G) {
        __m256i p16[R];
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) p16[r] = _mm256_setzero_si256();
        // Offset formats with sub-scales (Q3_K): every row's int16 sums of
        // these groups start at -kOffset * (their pairs of x), shared by all rows.
        if constexpr (OffsetPerHalf<F>()) {
          __m256i off = _mm256_setzero_si256();
#pragma GCC unroll 8
          for (int g = g0; g < g0 + G; ++g) {
            off = _mm256_add_epi16(
                off, _mm256_maddubs_epi16(_mm256_set1_epi8(F::kOffset), LoadBytes32(xb.q[g])));
          }
          off = _mm256_sub_epi16(_mm256_setzero_si256(), off);
#pragma GCC unroll 16
          for (int r = 0; r < R; ++r) p16[r] = off;
        }
#pragma GCC unroll 8
        for (int g = g0; g < g0 + G; ++g) {
          const __m256i xq = LoadBytes32(xb.q[g]);
#pragma GCC unroll 16
          for (int r = 0; r < R; ++r) {
            __m256i xs = xq;
            if constexpr (F::kSigned) xs = _mm256_sign_epi8(xq, BroadcastGroup(sign[r], g));
            p16[r] = KeepOrder(
                _mm256_add_epi16(p16[r], _mm256_maddubs_epi16(BroadcastGroup(u[r], g), xs)));
          }
        }
        // Groups 0..3 are elements 0..15 (the low sub-scale), groups 4..7 the
        // high one; when G = 8 both are 1.
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
          const __m256i scale =
              g0 < 4 ? _mm256_permute2x128_si256(wb[r].sub_scales, wb[r].sub_scales, 0x00)
                     : _mm256_permute2x128_si256(wb[r].sub_scales, wb[r].sub_scales, 0x11);
          sum[r] = KeepOrder(_mm256_add_epi32(sum[r], _mm256_madd_epi16(p16[r], scale)));
        }
      }
      // Offset formats: sum((q + k) * x) - k * sum(x), exactly the signed sum.
      __m256i xoff = _mm256_setzero_si256();
      if constexpr (F::kOffset != 0 && !OffsetPerHalf<F>()) {
        xoff = _mm256_mullo_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.sum)),
                                  _mm256_set1_epi32(F::kOffset));
      }
      const __m256 xd = _mm256_loadu_ps(xb.d);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        if constexpr (F::kOffset != 0 && !OffsetPerHalf<F>()) {
          sum[r] = _mm256_sub_epi32(sum[r], xoff);
        }
        const __m256 scale = _mm256_mul_ps(_mm256_broadcastss_ps(wb[r].dm), xd);
        acc[r] = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(sum[r]), acc[r]);
        if constexpr (F::kMin) {
          const __m256 m = _mm256_broadcastss_ps(_mm_movehdup_ps(wb[r].dm));
          acc[r] = _mm256_fmadd_ps(m, _mm256_loadu_ps(xb.s), acc[r]);
        }
      }
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, acc[r]);
    for (int t = 0; t < nt; ++t) out[t * out_stride + r] = lanes[t];
  }
}

// ---------------------------------------------------------------------------
// Drivers.

// Leftover tokens fewer than this use RowTokenTile; more fill a padded group
// of 8 (a Token8Tile costs about as much as 2-3 tokens of RowTokenTile).
// Either way the results are the same bits (batch invariance).
constexpr int64_t kMinTokensForGroup = 3;

// Tokens xs[0..nt) (nt = 1 or 2) over rows [r_begin, r_end).
template <class F>
void RowTokenTiles(const uint8_t* w, size_t row_bytes, int64_t num_blocks, int64_t r_begin,
                   int64_t r_end, const BlockQ8* const* xs, int64_t nt, float* out,
                   int64_t out_stride) {
  auto run = [&]<int T, int R>(int64_t r) {
    if constexpr (R == 1) {
      OneRowTile<F, T>(w + static_cast<size_t>(r) * row_bytes, num_blocks, xs, out + r, out_stride);
    } else {
      RowTokenTile<F, R, T>(w + static_cast<size_t>(r) * row_bytes, row_bytes, num_blocks, xs,
                            out + r, out_stride);
    }
  };
  if (nt == 1) {
    PrefetchLeadIn(w, row_bytes, r_begin, r_end, 8);
    ForRowTiles<8, 1>(r_begin, r_end, [&]<int R>(int64_t r) { run.template operator()<1, R>(r); });
  } else {
    PrefetchLeadIn(w, row_bytes, r_begin, r_end, 4);
    ForRowTiles<4, 1>(r_begin, r_end, [&]<int R>(int64_t r) { run.template operator()<2, R>(r); });
  }
}

// Scratch for interleaved activations: grows to the largest call, then stays.
template <class X>
std::vector<X>& InterleaveScratch() {
  thread_local std::vector<X> scratch;
  return scratch;
}

template <class F>
void QuantMatMul(const uint8_t* w, size_t row_bytes, int64_t n, int64_t r0, int64_t r1,
                 const ActRow* x, int64_t num_tokens, float* out, int64_t out_stride) {
  const int64_t num_blocks = n / (32 * F::kSubBlocks / Passes<F>());
  const int64_t num_xblocks = n / 32;
  for (int64_t t0 = 0; t0 < num_tokens; t0 += kTokenBatch) {
    const int64_t nt = std::min(kTokenBatch, num_tokens - t0);
    float* const o = out + t0 * out_stride;
    const BlockQ8* xs[kTokenBatch];
    for (int64_t t = 0; t < nt; ++t) xs[t] = x[t0 + t].q8;
    // Tokens [0, grouped) go in groups of 8 (the last possibly padded); the
    // rest, fewer than kMinTokensForGroup, through RowTokenTile.
    const int64_t tail = nt % 8 < kMinTokensForGroup ? nt % 8 : 0;
    const int64_t grouped = nt - tail;
    const int64_t num_groups = (grouped + 7) / 8;
    if (num_groups == 0) {
      RowTokenTiles<F>(w, row_bytes, num_blocks, r0, r1, xs, nt, o, out_stride);
      continue;
    }
    std::vector<XBlockFor<F>>& xg = InterleaveScratch<XBlockFor<F>>();
    if (xg.size() < static_cast<size_t>(num_groups * num_xblocks)) {
      xg.resize(num_groups * num_xblocks);
    }
    for (int64_t g = 0; g < num_groups; ++g) {
      const int cnt = static_cast<int>(std::min<int64_t>(8, grouped - 8 * g));
      InterleaveTokens(xs + 8 * g, cnt, num_xblocks, xg.data() + g * num_xblocks);
    }
    const int64_t chunk = ChunkRows<4>(row_bytes);
    for (int64_t rc = r0; rc < r1; rc += chunk) {
      const int64_t rc_end = std::min(r1, rc + chunk);
      for (int64_t g = 0; g < num_groups; ++g) {
        const int cnt = static_cast<int>(std::min<int64_t>(8, grouped - 8 * g));
        ForRowTiles<4, 1>(rc, rc_end, [&]<int R>(int64_t r) {
          Token8Tile<F, R>(w + static_cast<size_t>(r) * row_bytes, row_bytes, num_blocks,
                           xg.data() + g * num_xblocks, cnt, o + 8 * g * out_stride + r,
                           out_stride);
        });
      }
      if (tail > 0) {
        RowTokenTiles<F>(w, row_bytes, num_blocks, rc, rc_end, xs + grouped, tail,
                         o + grouped * out_stride, out_stride);
      }
    }
  }
}

// Float weights: Load8(row, i) gives elements i..i+7 of a row as fp32.
struct F32 {
  static constexpr size_t kElementBytes = 4;
  static __m256 Load8(const uint8_t* row, int64_t i) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row + 4 * i));
  }
};
struct F16 {
  static constexpr size_t kElementBytes = 2;
  static __m256 Load8(const uint8_t* row, int64_t i) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i)));
  }
};
struct BF16 {
  static constexpr size_t kElementBytes = 2;
  static __m256 Load8(const uint8_t* row, int64_t i) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
};

// R rows x T tokens of float weights, n a multiple of 8. Lane k of acc[r][t]
// accumulates the products of elements k, k + 8, k + 16, ... in order with
// one fma each, then HorizontalSum adds the lanes in a fixed tree: the
// canonical float order of quant.h, whatever R, T and the other tokens.
template <class F, int R, int T>
void FloatTile(const uint8_t* w, size_t row_bytes, int64_t n, const float* const* xs, float* out,
               int64_t out_stride) {
  __m256 acc[R][T];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  }
  // One token: prefetch the rows ahead as RowTokenTile does.
  const uintptr_t ahead = reinterpret_cast<uintptr_t>(w) + kPrefetchRows * row_bytes;
  constexpr size_t kAheadStep = R * 8 * F::kElementBytes;
  for (int64_t i = 0; i < n; i += 8) {
    if constexpr (T == 1) {
      const uintptr_t p = ahead + (i / 8) * kAheadStep;
      for (size_t off = 0; off < kAheadStep; off += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(p + off), _MM_HINT_T0);
      }
    }
    __m256 wv[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) wv[r] = F::Load8(w + static_cast<size_t>(r) * row_bytes, i);
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      const __m256 xv = _mm256_loadu_ps(xs[t] + i);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) acc[r][t] = _mm256_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) out[t * out_stride + r] = HorizontalSum(acc[r][t]);
  }
}

template <class F>
void FloatMatMul(const uint8_t* w, size_t row_bytes, int64_t n, int64_t r0, int64_t r1,
                 const ActRow* x, int64_t num_tokens, float* out, int64_t out_stride) {
  const int64_t chunk = num_tokens > 4 ? ChunkRows<4>(row_bytes) : r1 - r0;
  for (int64_t rc = r0; rc < r1; rc += chunk) {
    const int64_t rc_end = std::min(r1, rc + chunk);
    for (int64_t t0 = 0; t0 < num_tokens; t0 += 4) {
      const float* xs[4] = {};
      const int64_t nt = std::min<int64_t>(4, num_tokens - t0);
      for (int64_t t = 0; t < nt; ++t) xs[t] = x[t0 + t].f32;
      float* const o = out + t0 * out_stride;
      auto run = [&]<int T, int R>(int64_t r) {
        FloatTile<F, R, T>(w + static_cast<size_t>(r) * row_bytes, row_bytes, n, xs, o + r,
                           out_stride);
      };
      switch (nt) {
        case 1:
          PrefetchLeadIn(w, row_bytes, rc, rc_end, 4);
          ForRowTiles<4, 1>(rc, rc_end,
                            [&]<int R>(int64_t r) { run.template operator()<1, R>(r); });
          break;
        case 2:
          ForRowTiles<3, 1>(rc, rc_end,
                            [&]<int R>(int64_t r) { run.template operator()<2, R>(r); });
          break;
        case 3:
          ForRowTiles<3, 1>(rc, rc_end,
                            [&]<int R>(int64_t r) { run.template operator()<3, R>(r); });
          break;
        default:
          ForRowTiles<3, 1>(rc, rc_end,
                            [&]<int R>(int64_t r) { run.template operator()<4, R>(r); });
          break;
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Dequantization, from the same Unpack helpers. Values equal the scalar
// code's except that d * q + m is one fused rounding here (formats with a
// real min: Q4_1, Q5_1, Q4_K, Q5_K). Q2_K (two passes per block) uses the
// scalar code.

template <class F>
void DequantizeQuant(const uint8_t* p, float* out, int64_t n) {
  static_assert(Passes<F>() == 1, "Q2_K dequantizes with the scalar code");
  for (int64_t b = 0; b < n / (32 * F::kSubBlocks); ++b, p += F::kBlockBytes) {
    const typename F::Header header = F::Prepare(p);
    for (int j = 0; j < F::kSubBlocks; ++j, out += 32) {
      const WeightBlock wb = F::Unpack(header, j);
      const __m128i lo = _mm256_castsi256_si128(wb.q), hi = _mm256_extracti128_si256(wb.q, 1);
      const __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
      for (int i = 0; i < 4; ++i) {
        __m256 q = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(parts[i]));
        if constexpr (F::kOffset != 0) q = _mm256_sub_ps(q, _mm256_set1_ps(F::kOffset));  // exact
        const float d = _mm_cvtss_f32(wb.dm);
        __m256 v;
        if constexpr (F::kMin) {
          const float m = _mm_cvtss_f32(_mm_movehdup_ps(wb.dm));
          v = _mm256_fmadd_ps(_mm256_set1_ps(d), q, _mm256_set1_ps(m));
        } else {
          const int sub = i < 2 ? _mm256_extract_epi16(wb.sub_scales, 0)
                                : _mm256_extract_epi16(wb.sub_scales, 8);
          v = _mm256_mul_ps(_mm256_set1_ps(d * static_cast<float>(static_cast<int16_t>(sub))), q);
        }
        _mm256_storeu_ps(out + 8 * i, v);
      }
    }
  }
}

template <class F>
void DequantizeFloat(const uint8_t* p, float* out, int64_t n) {
  for (int64_t i = 0; i < n; i += 8) _mm256_storeu_ps(out + i, F::Load8(p, i));
}

}  // namespace

// ---------------------------------------------------------------------------
// Entry points.

// Q2_K (two passes per block) dequantizes with the scalar code.
template <class F>
void DequantizeFormat(TensorType type, const uint8_t* p, float* out, int64_t n) {
  if constexpr (Passes<F>() == 1) {
    DequantizeQuant<F>(p, out, n);
  } else {
    DequantizeRowScalar(type, p, out, n);
  }
}

void DequantizeRowAvx2(TensorType type, const void* row, float* out, int64_t n) {
  const auto* p = static_cast<const uint8_t*>(row);
  switch (type) {
    case TensorType::kF16:
      // Float rows may have any length: convert the tail one by one.
      DequantizeFloat<F16>(p, out, n / 8 * 8);
      for (int64_t i = n / 8 * 8; i < n; ++i) out[i] = HalfToFloat(LoadU16(p + 2 * i));
      return;
    case TensorType::kBF16:
      DequantizeFloat<BF16>(p, out, n / 8 * 8);
      for (int64_t i = n / 8 * 8; i < n; ++i) out[i] = Bf16ToFloat(LoadU16(p + 2 * i));
      return;
#define LLM_QUANT_CASE(F, block_elements) \
  case TensorType::k##F:                  \
    return DequantizeFormat<F>(type, p, out, n);
      LLM_QUANT_WEIGHT_FORMATS(LLM_QUANT_CASE)
#undef LLM_QUANT_CASE
    default:
      return DequantizeRowScalar(type, row, out, n);  // F32: a copy
  }
}

void QuantizeQ8Avx2(const float* x, BlockQ8* out, int64_t n) {
  const __m256 lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
  const int64_t num_blocks = n / kQ8Block;
  // Blocks go 8 at a time: first their maxima, then d and 1/d for all 8 with
  // one vector division each (IEEE division rounds alike in every lane and in
  // QuantizeQ8Scalar, so the blocks match it exactly), then the codes.
  for (int64_t b0 = 0; b0 < num_blocks; b0 += 8) {
    const int64_t count = std::min<int64_t>(8, num_blocks - b0);
    alignas(32) float amax[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t j = 0; j < count; ++j) amax[j] = BlockAbsMax(x + (b0 + j) * kQ8Block);
    // Same arithmetic as QuantizeQ8Scalar: d = amax / 127, id = d != 0 ? 1 / d : 0.
    const __m256 d8 = _mm256_div_ps(_mm256_load_ps(amax), _mm256_set1_ps(127.0f));
    const __m256 id8 = _mm256_and_ps(_mm256_div_ps(_mm256_set1_ps(1.0f), d8),
                                     _mm256_cmp_ps(d8, _mm256_setzero_ps(), _CMP_NEQ_OQ));
    alignas(32) float ds[8], ids[8];
    _mm256_store_ps(ds, d8);
    _mm256_store_ps(ids, id8);
    for (int64_t j = 0; j < count; ++j) {
      const float* xb = x + (b0 + j) * kQ8Block;
      const __m256 idv = _mm256_set1_ps(ids[j]);
      __m256i q[4];
      for (int i = 0; i < 4; ++i) {
        // max(v, lo) returns lo for NaN, as fmax does in the scalar code.
        const __m256 c =
            _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(_mm256_loadu_ps(xb + 8 * i), idv), lo), hi);
        q[i] =
            _mm256_cvtps_epi32(_mm256_round_ps(c, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
      }
      const __m256i sum8 =
          _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
      __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sum8), _mm256_extracti128_si256(sum8, 1));
      s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
      s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
      // Pack 4 x 8 int32 to 32 int8; the packs work per 128-bit lane, so the
      // dwords come out as q0[0..3] q1[0..3] q2[0..3] q3[0..3] q0[4..7] ...
      const __m256i p8 =
          _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
      const __m256i ordered =
          _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
      BlockQ8& ob = out[b0 + j];
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(ob.q), ordered);
      ob.d = ds[j];
      ob.s = ds[j] * static_cast<float>(_mm_cvtsi128_si32(s4));
    }
  }
}

void MatMulTileAvx2(TensorType type, const uint8_t* w, size_t row_bytes, int64_t n, int64_t r0,
                    int64_t r1, const ActRow* x, int64_t num_tokens, float* out,
                    int64_t out_stride) {
  switch (type) {
#define LLM_FLOAT_CASE(F) \
  case TensorType::k##F:  \
    return FloatMatMul<F>(w, row_bytes, n, r0, r1, x, num_tokens, out, out_stride);
    LLM_FLOAT_WEIGHT_FORMATS(LLM_FLOAT_CASE)
#undef LLM_FLOAT_CASE
#define LLM_QUANT_CASE(F, block_elements) \
  case TensorType::k##F:                  \
    return QuantMatMul<F>(w, row_bytes, n, r0, r1, x, num_tokens, out, out_stride);
    LLM_QUANT_WEIGHT_FORMATS(LLM_QUANT_CASE)
#undef LLM_QUANT_CASE
    default:
      Fatal("MatMulTile: unsupported weight type");
  }
}

float DotRowAvx2(TensorType type, const void* w, const ActRow& x, int64_t n) {
  float out = 0.0f;
  MatMulTileAvx2(type, static_cast<const uint8_t*>(w), 0, n, 0, 1, &x, 1, &out, 1);
  return out;
}

}  // namespace llm::kernels::internal
