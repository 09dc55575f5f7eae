// AVX-512 VNNI one-token kernels: the K-quants (Q2_K to Q6_K), Q4_0, Q4_1,
// Q5_0, Q5_1 and Q8_0. This file is compiled with -mavx512f -mavx512bw -mavx512vl
// -mavx512vnni -mavx2 -mfma -mf16c -ffp-contract=off; nothing in it may run
// before quant.cc has checked CpuHasAvx512Vnni().
//
// Decode reads every weight once per token, so it should run at the memory's
// pace; the AVX2 RowTokenTile spends about one instruction per weight byte on
// a K-quant (unpacking the 6-bit scales row by row, a reduction tree per
// 8 rows and sub-block), which on two cores is below the read bandwidth.
// The tiles here take 16 rows at once, one row per zmm lane in the float step:
//
//  * the scales of a super-block (or of a block) are unpacked for all 16 rows
//    together, the rows' headers gathered into the lanes (vpgatherdd), so
//    each lane holds its row's d * sc_j and -dmin * mn_j (or its sub-scales
//    and mins, or its block's d and m);
//  * vpdpbusd adds 4 products per int32 lane, and a tree of blends and
//    shuffles ends with each row's exact integer sums of its sub-blocks (or
//    of their halves, for sub-scales) in its lane;
//  * the canonical float step (quant.h) then runs once for all 16 lanes.
//
// Three tiles: HalvesTile16 (Q4_K, Q5_K, Q6_K) and PairTile16 (Q4_0, Q4_1,
// Q5_0, Q5_1, Q8_0) hold one row's 64 bytes of codes per zmm and fold the
// first level of the tree into the products (FoldRowPair); DecodeTile16
// (Q2_K, Q3_K) holds two rows' 32 bytes per zmm. Each prefetches the rows
// PrefetchDistance() ahead into L2, at its own pace, as one sequential stream.
//
// Batch invariance: each lane performs exactly the canonical order's fp32
// operations for its row, so the bits equal the AVX2 and scalar kernels'.
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "model_svc/kernels/avx512_vnni_target.h"
#include "model_svc/kernels/quant_internal.h"
#include "model_svc/kernels/quant_x86_formats.h"

namespace llm::kernels::internal {
namespace {

constexpr int kTileRows = 16;
// How far ahead of its reads a tile prefetches its rows (into L2), in whole
// tiles of 16 rows: two where a tile is shorter than kShortTileBytes, else
// one. One tile of 576-column rows (6 KB) was too short from DRAM, two tiles
// of 2048-column K-quant rows (37 KB) too long for the 80-row ranges of a
// decode step (matmul_bench BM_DecodeCold).
constexpr size_t kShortTileBytes = 10 << 10;

inline size_t PrefetchDistance(size_t row_bytes) {
  const size_t tile = kTileRows * row_bytes;
  return tile < kShortTileBytes ? 2 * tile : tile;
}

// Rows a (low 256 bits) and b (high 256 bits): 32 bytes of each.
inline __m512i Load2(const uint8_t* a, const uint8_t* b) {
  return _mm512_inserti64x4(
      _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a))),
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b)), 1);
}

// The 32-bit word at byte `offset` of each of the 16 rows' blocks (row r's
// block starts at block + rows[r]).
template <int kOffset>
inline __m512i GatherWord(const uint8_t* block, __m512i rows) {
  return _mm512_i32gather_epi32(rows, block + kOffset, 1);
}

// Chunk transposes of four zmm g[0..3], each holding 4 rows per 128-bit
// chunk (g[q]: rows 4q..4q+3): lane r of t[k] is row r's value of chunk k.
inline void TransposeChunks(const __m512i* g, __m512i* t) {
  const __m512i u0 = _mm512_shuffle_i32x4(g[0], g[1], _MM_SHUFFLE(1, 0, 1, 0));
  const __m512i u1 = _mm512_shuffle_i32x4(g[0], g[1], _MM_SHUFFLE(3, 2, 3, 2));
  const __m512i v0 = _mm512_shuffle_i32x4(g[2], g[3], _MM_SHUFFLE(1, 0, 1, 0));
  const __m512i v1 = _mm512_shuffle_i32x4(g[2], g[3], _MM_SHUFFLE(3, 2, 3, 2));
  t[0] = _mm512_shuffle_i32x4(u0, v0, _MM_SHUFFLE(2, 0, 2, 0));
  t[1] = _mm512_shuffle_i32x4(u0, v0, _MM_SHUFFLE(3, 1, 3, 1));
  t[2] = _mm512_shuffle_i32x4(u1, v1, _MM_SHUFFLE(2, 0, 2, 0));
  t[3] = _mm512_shuffle_i32x4(u1, v1, _MM_SHUFFLE(3, 1, 3, 1));
}

// Byte k of every 32-bit lane, zero-extended (k a constant once inlined).
inline __m512i ByteOf(__m512i v, int k) {
  if (k == 3) return _mm512_srli_epi32(v, 24);
  return _mm512_and_si512(k == 0 ? v : _mm512_srli_epi32(v, 8 * k), _mm512_set1_epi32(0xFF));
}

// Byte k of every 32-bit lane, sign-extended.
inline __m512i SignedByteOf(__m512i v, int k) {
  return _mm512_srai_epi32(k == 3 ? v : _mm512_slli_epi32(v, 24 - 8 * k), 24);
}

// The two per-16-element values of each sub-block j from 4 words of 4 bytes
// (value i is byte i % 4 of word i / 4): lo[j] = byte(value 2j), hi[j] =
// byte(value 2j + 1), byte = ByteOf or SignedByteOf.
template <class Byte>
[[gnu::always_inline]] inline void SubBlockPairs(const __m512i* words, Byte byte, __m512i* lo,
                                                 __m512i* hi) {
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) {
    lo[j] = byte(words[j >> 1], 2 * (j & 1));
    hi[j] = byte(words[j >> 1], 2 * (j & 1) + 1);
  }
}

// fp16 in the low (kHigh false) or high 16 bits of every lane -> fp32.
template <bool kHigh>
inline __m512 HalfOf(__m512i v) {
  return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(kHigh ? _mm512_srli_epi32(v, 16) : v));
}

// ---------------------------------------------------------------------------
// Formats, as the tile reads them. Each provides:
//   kBlockBytes; kOffset: the codes fed to vpdpbusd are q + kOffset (>= 0);
//   Scales and Prepare(block, rows, &scales): a super-block's scales of the
//     16 rows, lane r for row r;
//   Codes(a, b, j): the unsigned codes of sub-block j of rows a and b;
//   kSubScales: the half sums are multiplied by the int32 sub-scales
//     scales.lo[j] / scales.hi[j] (else added), then the step uses
//     scales.d (one per super-block); otherwise scales.d[j] and scales.m[j]
//     (kMin) are the canonical dw_b and m_b.

// Q4_K and Q5_K share d, dmin and the 12 scale bytes.
struct KScalesMins {
  __m512 d[8];  // d * sc_j
  __m512 m[8];  // -dmin * mn_j
};

[[gnu::always_inline]] inline void PrepareKScalesMins(const uint8_t* block, __m512i rows,
                                                      KScalesMins* s) {
  const __m512i dm = GatherWord<0>(block, rows);  // d | dmin << 16
  const __m512i u0 = GatherWord<4>(block, rows), u1 = GatherWord<8>(block, rows),
                u2 = GatherWord<12>(block, rows);
  // Q4KScaleMin for all j (the AVX2 Q4_K::Prepare's words, per lane).
  const __m512i m3f = _mm512_set1_epi32(0x3F3F3F3F), m0f = _mm512_set1_epi32(0x0F0F0F0F),
                m03 = _mm512_set1_epi32(0x03030303);
  const __m512i sc_lo = _mm512_and_si512(u0, m3f), mn_lo = _mm512_and_si512(u1, m3f);
  const __m512i sc_hi =
      _mm512_or_si512(_mm512_and_si512(u2, m0f),
                      _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(u0, 6), m03), 4));
  const __m512i mn_hi =
      _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(u2, 4), m0f),
                      _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(u1, 6), m03), 4));
  const __m512 d = HalfOf<false>(dm);
  const __m512 neg_dmin = _mm512_sub_ps(_mm512_setzero_ps(), HalfOf<true>(dm));
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    s->d[k] = _mm512_mul_ps(_mm512_cvtepi32_ps(ByteOf(sc_lo, k)), d);
    s->m[k] = _mm512_mul_ps(_mm512_cvtepi32_ps(ByteOf(mn_lo, k)), neg_dmin);
    s->d[k + 4] = _mm512_mul_ps(_mm512_cvtepi32_ps(ByteOf(sc_hi, k)), d);
    s->m[k + 4] = _mm512_mul_ps(_mm512_cvtepi32_ps(ByteOf(mn_hi, k)), neg_dmin);
  }
}

// Bit `from` of every byte moved to bit `to`, the other bits cleared (a
// 16-bit shift by less than 8 keeps it within its byte once masked).
inline __m512i MoveBit(__m512i v, int from, int to) {
  if (from < to) {
    v = _mm512_slli_epi16(v, to - from);
  } else if (from > to) {
    v = _mm512_srli_epi16(v, from - to);
  }
  return _mm512_and_si512(v, _mm512_set1_epi8(static_cast<char>(1 << to)));
}

// v shifted left by kS0 (low 256 bits) and kS1 (high 256 bits) within each
// 16-bit lane, or right by -kS0 / -kS1 (the two not of opposite signs).
template <int kS0, int kS1>
inline __m512i ShiftHalves(__m512i v) {
  static_assert(kS0 * kS1 >= 0, "one direction per zmm");
  constexpr int kLeft = kS0 > 0 || kS1 > 0;
  const __m512i counts =
      _mm512_inserti64x4(_mm512_set1_epi16(static_cast<int16_t>(kLeft ? kS0 : -kS0)),
                         _mm256_set1_epi16(static_cast<int16_t>(kLeft ? kS1 : -kS1)), 1);
  return kLeft ? _mm512_sllv_epi16(v, counts) : _mm512_srlv_epi16(v, counts);
}

// nib | (high & mask) per bit (vpternlogd 0xF8: A | (B & C)).
inline __m512i OrMasked(__m512i nib, __m512i high, int mask) {
  return _mm512_ternarylogic_epi32(nib, high, _mm512_set1_epi8(static_cast<char>(mask)), 0xF8);
}

// The low and high nibbles of 64 bytes.
inline void Nibbles(const uint8_t* p, __m512i* lo, __m512i* hi) {
  const __m512i v = _mm512_loadu_si512(p);
  *lo = _mm512_and_si512(v, _mm512_set1_epi8(0x0F));
  *hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), _mm512_set1_epi8(0x0F));
}

// The 32 bytes at p in both halves of a zmm.
inline __m512i Broadcast32(const void* p) {
  return _mm512_broadcast_i64x4(_mm256_loadu_si256(static_cast<const __m256i*>(p)));
}

// Q4_K: qs[64h..] holds sub-blocks 4h, 4h + 1 (low, high nibbles of bytes
// 0..31) and 4h + 2, 4h + 3 (bytes 32..63).
struct DQ4_K {
  static constexpr size_t kBlockBytes = kQ4_KBytes;
  static constexpr int kOffset = 0;
  static constexpr bool kSubScales = false;
  static constexpr bool kMin = true;
  using Scales = KScalesMins;
  [[gnu::always_inline]] static void Prepare(const uint8_t* block, __m512i rows, Scales* s) {
    PrepareKScalesMins(block, rows, s);
  }
  static constexpr int kPairs[2][2] = {{0, 2}, {1, 3}};
  template <int kH>
  static void Codes(const uint8_t* block, __m512i* codes) {
    Nibbles(block + 16 + 64 * kH, &codes[0], &codes[1]);
  }
};

// Q5_K: Q4_K's nibbles (qs at 48) and bit j of qh[l] (qh at 16) as bit 4.
struct DQ5_K {
  static constexpr size_t kBlockBytes = kQ5_KBytes;
  static constexpr int kOffset = 0;
  static constexpr bool kSubScales = false;
  static constexpr bool kMin = true;
  using Scales = KScalesMins;
  [[gnu::always_inline]] static void Prepare(const uint8_t* block, __m512i rows, Scales* s) {
    PrepareKScalesMins(block, rows, s);
  }
  static constexpr int kPairs[2][2] = {{0, 2}, {1, 3}};
  template <int kH>
  static void Codes(const uint8_t* block, __m512i* codes) {
    __m512i lo, hi;
    Nibbles(block + 48 + 64 * kH, &lo, &hi);
    const __m512i qh = Broadcast32(block + 16);
    // Bit j to bit 4: left by 4 - j (j = 4h + 0 / 2 in codes[0], + 1 / 3 in codes[1]).
    codes[0] = OrMasked(lo, ShiftHalves<4 - 4 * kH, 2 - 4 * kH>(qh), 0x10);
    codes[1] = OrMasked(hi, ShiftHalves<3 - 4 * kH, 1 - 4 * kH>(qh), 0x10);
  }
};

// Q6_K: ql[64h..] holds sub-blocks 4h, 4h + 1 (low nibbles of bytes 0..31,
// 32..63) and 4h + 2, 4h + 3 (high nibbles); bits 2k, 2k + 1 of qh[32h + l]
// (qh at 128) are bits 4, 5 of sub-block 4h + k's element l.
struct DQ6_K {
  static constexpr size_t kBlockBytes = kQ6_KBytes;
  static constexpr int kOffset = 32;
  static constexpr bool kSubScales = true;
  static constexpr bool kMin = false;
  struct Scales {
    __m512 d;
    __m512i lo[8], hi[8];  // the int8 scales 2j and 2j + 1
  };
  [[gnu::always_inline]] static void Prepare(const uint8_t* block, __m512i rows, Scales* s) {
    s->d = HalfOf<true>(GatherWord<206>(block, rows));  // scales[14..15] | d
    const __m512i w[4] = {GatherWord<192>(block, rows), GatherWord<196>(block, rows),
                          GatherWord<200>(block, rows), GatherWord<204>(block, rows)};
    SubBlockPairs(w, SignedByteOf, s->lo, s->hi);
  }
  static constexpr int kPairs[2][2] = {{0, 1}, {2, 3}};
  template <int kH>
  static void Codes(const uint8_t* block, __m512i* codes) {
    __m512i lo, hi;
    Nibbles(block + 64 * kH, &lo, &hi);
    const __m512i qh = Broadcast32(block + 128 + 32 * kH);
    codes[0] = OrMasked(lo, ShiftHalves<4, 2>(qh), 0x30);
    codes[1] = OrMasked(hi, ShiftHalves<0, -2>(qh), 0x30);
  }
};

// Q3_K and Q2_K: the 2-bit codes of sub-block j, qs[32 * (j / 4)..] shifted
// right by 2 * (j % 4).
inline __m512i TwoBitCodes(const uint8_t* qa, const uint8_t* qb, int j) {
  __m512i v = Load2(qa + 32 * (j >> 2), qb + 32 * (j >> 2));
  if ((j & 3) != 0) v = _mm512_srli_epi16(v, 2 * (j & 3));
  return _mm512_and_si512(v, _mm512_set1_epi8(3));
}

struct DQ3_K {
  static constexpr size_t kBlockBytes = kQ3_KBytes;
  static constexpr int kOffset = 4;
  static constexpr bool kSubScales = true;
  static constexpr bool kMin = false;
  struct Scales {
    __m512 d;
    __m512i lo[8], hi[8];  // scales 2j and 2j + 1, minus 32
  };
  [[gnu::always_inline]] static void Prepare(const uint8_t* block, __m512i rows, Scales* s) {
    s->d = HalfOf<true>(GatherWord<106>(block, rows));  // scales[10..11] | d
    // Q3KScales per lane (the AVX2 Q3_K::Prepare's words): byte k of a[i]
    // is scale 4i + k, plus 32.
    const __m512i a0 = GatherWord<96>(block, rows), a1 = GatherWord<100>(block, rows),
                  t = GatherWord<104>(block, rows);
    const __m512i m0f = _mm512_set1_epi32(0x0F0F0F0F), m03 = _mm512_set1_epi32(0x03030303);
    auto high = [&](int shift) {
      return _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(t, shift), m03), 4);
    };
    const __m512i a[4] = {
        _mm512_or_si512(_mm512_and_si512(a0, m0f), high(0)),
        _mm512_or_si512(_mm512_and_si512(a1, m0f), high(2)),
        _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(a0, 4), m0f), high(4)),
        _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(a1, 4), m0f), high(6)),
    };
    const __m512i bias = _mm512_set1_epi32(32);
    SubBlockPairs(
        a, [&](__m512i v, int k) { return _mm512_sub_epi32(ByteOf(v, k), bias); }, s->lo, s->hi);
  }
  // q + 4 in [0, 7]: the 2-bit code (qs at 32), plus 4 where bit j of
  // hmask[l] (at 0) is set.
  static __m512i Codes(const uint8_t* a, const uint8_t* b, int j) {
    return _mm512_or_si512(TwoBitCodes(a + 32, b + 32, j), MoveBit(Load2(a, b), j, 2));
  }
};

// Q2_K: codes in [0, 3] with 4-bit sub-scales, and 4-bit mins per 16
// elements, whose step (quant.h) runs after the codes' one: kMinPerHalf.
struct DQ2_K {
  static constexpr size_t kBlockBytes = kQ2_KBytes;
  static constexpr int kOffset = 0;
  static constexpr bool kSubScales = true;
  static constexpr bool kMin = false;
  static constexpr bool kMinPerHalf = true;
  struct Scales {
    __m512 d, neg_dmin;
    __m512i lo[8], hi[8];    // scales 2j and 2j + 1
    __m512i mlo[8], mhi[8];  // their mins
  };
  [[gnu::always_inline]] static void Prepare(const uint8_t* block, __m512i rows, Scales* s) {
    const __m512i dm = GatherWord<80>(block, rows);  // d | dmin << 16
    s->d = HalfOf<false>(dm);
    s->neg_dmin = _mm512_castsi512_ps(
        _mm512_xor_si512(_mm512_castps_si512(HalfOf<true>(dm)),
                         _mm512_set1_epi32(std::numeric_limits<int32_t>::min())));
    const __m512i w[4] = {GatherWord<0>(block, rows), GatherWord<4>(block, rows),
                          GatherWord<8>(block, rows), GatherWord<12>(block, rows)};
    const __m512i low4 = _mm512_set1_epi32(0x0F);
    SubBlockPairs(
        w, [&](__m512i v, int k) { return _mm512_and_si512(ByteOf(v, k), low4); }, s->lo, s->hi);
    SubBlockPairs(
        w, [&](__m512i v, int k) { return _mm512_srli_epi32(ByteOf(v, k), 4); }, s->mlo, s->mhi);
  }
  static __m512i Codes(const uint8_t* a, const uint8_t* b, int j) {
    return TwoBitCodes(a + 16, b + 16, j);
  }
};

// F::kMinPerHalf, false when absent.
template <class F>
constexpr bool MinPerHalf() {
  if constexpr (requires { F::kMinPerHalf; }) {
    return F::kMinPerHalf;
  } else {
    return false;
  }
}

// ---------------------------------------------------------------------------
// The reduction tree.

// Level 1: lane 2m = a[2m] + a[2m + 1], lane 2m + 1 = b[2m] + b[2m + 1].
inline __m512i Fold32(__m512i a, __m512i b) {
  const __m512i x = _mm512_mask_blend_epi32(0xAAAA, a, b);
  const __m512i y = _mm512_shuffle_epi32(_mm512_mask_blend_epi32(0x5555, a, b), _MM_PERM_CDAB);
  return _mm512_add_epi32(x, y);
}

// Level 2: per 128 bits, [a0 + a2, a1 + a3, b0 + b2, b1 + b3].
inline __m512i Fold64(__m512i a, __m512i b) {
  const __m512i x = _mm512_mask_blend_epi32(0xCCCC, a, b);
  const __m512i y = _mm512_shuffle_epi32(_mm512_mask_blend_epi32(0x3333, a, b), _MM_PERM_BADC);
  return _mm512_add_epi32(x, y);
}

// Rows r of the tile, in zmm i of a sub-block's products: (kRowA[i], kRowA[i]
// + 4), so that the tree's 128-bit lanes come out in row order.
constexpr int kRowA[8] = {0, 1, 2, 3, 8, 9, 10, 11};

// Block b's share of the rows PrefetchDistance() ahead of the tile at w (the
// rows are contiguous: one sequential stream at the tile's pace), into L2: a
// tile of Q6_K rows of 2048 columns is 27 KB, and prefetched into L1 it would
// evict the current one.
template <class F>
inline void PrefetchRowsAhead(const uint8_t* w, size_t distance, int64_t b) {
  const uintptr_t next =
      reinterpret_cast<uintptr_t>(w) + distance + b * (kTileRows * F::kBlockBytes);
  for (size_t off = 0; off < kTileRows * F::kBlockBytes + 63; off += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(next + off), _MM_HINT_T1);
  }
}

// The 16 rows' super-blocks in turn: each prefetches its share of the tiles
// ahead and unpacks its scales, then step(block, scales, b, acc) adds its
// float steps to acc; out = acc.
template <class F, class Step>
[[gnu::always_inline]] inline void ForSuperBlocks(const uint8_t* w, int64_t num_blocks,
                                                  size_t distance, __m512i rows, float* out,
                                                  Step step) {
  __m512 acc = _mm512_setzero_ps();
  for (int64_t b = 0; b < num_blocks; ++b) {
    PrefetchRowsAhead<F>(w, distance, b);
    const uint8_t* const block = w + b * F::kBlockBytes;
    typename F::Scales scales;
    F::Prepare(block, rows, &scales);
    step(block, scales, b, acc);
  }
  _mm512_storeu_ps(out, acc);
}

// out[r] = dot(row r, x) for the 16 rows from w (row stride row_bytes).
template <class F>
void DecodeTile16(const uint8_t* w, size_t row_bytes, int64_t num_blocks, const BlockQ8* x,
                  size_t distance, __m512i rows, float* out) {
  auto step = [&](const uint8_t* block, const typename F::Scales& scales, int64_t b, __m512& acc)
      __attribute__((always_inline)) {
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      const BlockQ8& xb = x[8 * b + j];
      const __m512i xq =
          _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.q)));
      // Chains start at -kOffset * (the codes' sums of each lane's 4
      // elements), so they end at the signed codes' exact sums.
      __m512i start = _mm512_setzero_si512();
      if constexpr (F::kOffset != 0) {
        start =
            _mm512_sub_epi32(start, _mm512_dpbusd_epi32(start, _mm512_set1_epi8(F::kOffset), xq));
      }
      __m512i p[8];
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) {
        const uint8_t* a = block + static_cast<size_t>(kRowA[i]) * row_bytes;
        p[i] = _mm512_dpbusd_epi32(start, F::Codes(a, a + 4 * row_bytes, j), xq);
      }
      // 128-bit lane k of h0 (h1): rows kRowA[0..3] (kRowA[4..7]) if k < 2,
      // else those + 4; elements 0..15 if k is even, else 16..31.
      const __m512i h0 = Fold64(Fold32(p[0], p[1]), Fold32(p[2], p[3]));
      const __m512i h1 = Fold64(Fold32(p[4], p[5]), Fold32(p[6], p[7]));
      // Lane r: row r's sums of elements 0..15 (lo) and 16..31 (hi).
      const __m512i lo = _mm512_shuffle_i32x4(h0, h1, _MM_SHUFFLE(2, 0, 2, 0));
      const __m512i hi = _mm512_shuffle_i32x4(h0, h1, _MM_SHUFFLE(3, 1, 3, 1));
      __m512i isum;
      __m512 dw;
      if constexpr (F::kSubScales) {
        isum = _mm512_add_epi32(_mm512_mullo_epi32(lo, scales.lo[j]),
                                _mm512_mullo_epi32(hi, scales.hi[j]));
        dw = scales.d;
      } else {
        isum = _mm512_add_epi32(lo, hi);
        dw = scales.d[j];
      }
      // The canonical step: acc = fma(dw * x.d, isum, acc) [, fma(m, x.s, acc)].
      acc = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(xb.d)), _mm512_cvtepi32_ps(isum), acc);
      if constexpr (F::kMin) acc = _mm512_fmadd_ps(scales.m[j], _mm512_set1_ps(xb.s), acc);
      if constexpr (MinPerHalf<F>()) {
        // The min step: acc = fma(-dmin * x.d, mn_lo * S_lo + mn_hi * S_hi,
        // acc), S the sums of x.q over elements 0..15 and 16..31.
        const __m512i sums = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(1), xq);
        const __m512i s_lo = _mm512_set1_epi32(_mm512_mask_reduce_add_epi32(0x000F, sums));
        const __m512i s_hi = _mm512_set1_epi32(_mm512_mask_reduce_add_epi32(0x00F0, sums));
        const __m512i msum = _mm512_add_epi32(_mm512_mullo_epi32(scales.mlo[j], s_lo),
                                              _mm512_mullo_epi32(scales.mhi[j], s_hi));
        acc = _mm512_fmadd_ps(_mm512_mul_ps(scales.neg_dmin, _mm512_set1_ps(xb.d)),
                              _mm512_cvtepi32_ps(msum), acc);
      }
    }
  };
  ForSuperBlocks<F>(w, num_blocks, distance, rows, out, step);
}

// ---------------------------------------------------------------------------
// The half-super-block tile (Q4_K, Q5_K, Q6_K): one row per zmm.
//
// DecodeTile16 builds every zmm of codes from two rows' 32-byte pieces (two
// loads and an insert per 32 codes). HalvesTile16 loads 64 bytes of one row
// at once, which hold the codes of four sub-blocks (half h of the super-block:
// sub-blocks 4h..4h+3), and splits them into two zmm of two sub-blocks each;
// each meets the matching two sub-blocks of x in vpdpbusd. Per 4 rows,
// FoldRowPair and Fold64 leave 128-bit chunk k of a zmm holding the 4 rows' sums of
// chunk k (16 elements); a transpose of the chunks across the 4 groups gives
// each sub-block's sums with lane r = row r, and the canonical float step
// runs as in DecodeTile16, sub-block after sub-block.
//
// A format provides DecodeTile16's kBlockBytes, kOffset, kSubScales, kMin,
// Scales and Prepare, and:
//   kPairs[c] = {s0, s1}: zmm c of a half holds sub-blocks 4h + s0 (low 256
//     bits) and 4h + s1;
//   Codes<h>(row_block, codes): the two zmm of unsigned codes of half h.

// Lane r of s[k]: row r's sum of chunks 2k and 2k + 1 of g, or with
// kInterleaved, of chunks k and k + 2 (6 shuffles instead of
// TransposeChunks' 8, and two adds).
template <bool kInterleaved = false>
inline void SumChunkPairs(const __m512i* g, __m512i* s) {
  constexpr int kA = kInterleaved ? _MM_SHUFFLE(1, 0, 1, 0) : _MM_SHUFFLE(2, 0, 2, 0);
  constexpr int kB = kInterleaved ? _MM_SHUFFLE(3, 2, 3, 2) : _MM_SHUFFLE(3, 1, 3, 1);
  // Per g[q]: [q's first sum, q's second sum] in chunks (0, 1) and (2, 3).
  const __m512i w0 =
      _mm512_add_epi32(_mm512_shuffle_i32x4(g[0], g[1], kA), _mm512_shuffle_i32x4(g[0], g[1], kB));
  const __m512i w1 =
      _mm512_add_epi32(_mm512_shuffle_i32x4(g[2], g[3], kA), _mm512_shuffle_i32x4(g[2], g[3], kB));
  s[0] = _mm512_shuffle_i32x4(w0, w1, _MM_SHUFFLE(2, 0, 2, 0));
  s[1] = _mm512_shuffle_i32x4(w0, w1, _MM_SHUFFLE(3, 1, 3, 1));
}

// x's codes with each pair of 32-bit lanes swapped, for FoldRowPair.
inline __m512i SwapPairs(__m512i act) { return _mm512_shuffle_epi32(act, _MM_PERM_CDAB); }

// The start of FoldRowPair's chains for codes that are q + kOffset:
// -kOffset * (each lane's and its neighbour's sums of x).
template <int kOffset>
inline __m512i ChainStart(__m512i act, __m512i swapped) {
  if constexpr (kOffset == 0) {
    return _mm512_setzero_si512();
  } else {
    const __m512i offset = _mm512_set1_epi8(static_cast<char>(kOffset));
    return _mm512_sub_epi32(
        _mm512_setzero_si512(),
        _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), offset, act), offset,
                            swapped));
  }
}

// Fold32(products of row a, products of row b) done on the codes, in two
// vpdpbusd instead of two, two blends, a shuffle and an add: lane 2m of
// `even` holds a's 32-bit lane 2m, of `odd` a's lane 2m + 1 (met by the
// swapped x); lane 2m + 1 of them b's lanes 2m + 1 and 2m.
inline __m512i FoldRowPair(__m512i a, __m512i b, __m512i start, __m512i act, __m512i swapped) {
  const __m512i even = _mm512_mask_blend_epi32(0xAAAA, a, b);
  const __m512i odd = _mm512_shuffle_epi32(_mm512_mask_blend_epi32(0x5555, a, b), _MM_PERM_CDAB);
  return _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(start, even, act), odd, swapped);
}

// Half kH of super-block `block` of the 16 rows: the float steps of
// sub-blocks 4kH..4kH + 3 into acc.
template <class F, int kH>
[[gnu::always_inline]] inline void HalfStep(const uint8_t* block, size_t row_bytes,
                                            const BlockQ8* x, const typename F::Scales& scales,
                                            __m512& acc) {
  // act[c]: x's sub-blocks of codes[c].
  __m512i act[2], swapped[2], start[2];
#pragma GCC unroll 2
  for (int c = 0; c < 2; ++c) {
    act[c] = _mm512_inserti64x4(
        _mm512_castsi256_si512(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[4 * kH + F::kPairs[c][0]].q))),
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[4 * kH + F::kPairs[c][1]].q)), 1);
    swapped[c] = SwapPairs(act[c]);
    start[c] = ChainStart<F::kOffset>(act[c], swapped[c]);
  }
  __m512i g[2][4];  // [c][q]: rows 4q..4q + 3, per chunk
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q) {
    __m512i codes[4][2];
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      F::template Codes<kH>(block + static_cast<size_t>(4 * q + i) * row_bytes, codes[i]);
    }
#pragma GCC unroll 2
    for (int c = 0; c < 2; ++c) {
      g[c][q] = Fold64(FoldRowPair(codes[0][c], codes[1][c], start[c], act[c], swapped[c]),
                       FoldRowPair(codes[2][c], codes[3][c], start[c], act[c], swapped[c]));
    }
  }
  // Lane r of half[c][2s + e]: row r's sum of elements 16e..16e + 15 of
  // sub-block 4kH + kPairs[c][s] (kSubScales), or whole[c][s] its whole sum.
  __m512i half[2][4], whole[2][2];
#pragma GCC unroll 2
  for (int c = 0; c < 2; ++c) {
    if constexpr (F::kSubScales) {
      TransposeChunks(g[c], half[c]);
    } else {
      SumChunkPairs(g[c], whole[c]);
    }
  }
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    const int j = 4 * kH + k;
    const int c = F::kPairs[0][0] == k || F::kPairs[0][1] == k ? 0 : 1;
    const int s = F::kPairs[c][0] == k ? 0 : 1;
    const BlockQ8& xb = x[j];
    __m512i isum;
    __m512 dw;
    if constexpr (F::kSubScales) {
      isum = _mm512_add_epi32(_mm512_mullo_epi32(half[c][2 * s], scales.lo[j]),
                              _mm512_mullo_epi32(half[c][2 * s + 1], scales.hi[j]));
      dw = scales.d;
    } else {
      isum = whole[c][s];
      dw = scales.d[j];
    }
    acc = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(xb.d)), _mm512_cvtepi32_ps(isum), acc);
    if constexpr (F::kMin) acc = _mm512_fmadd_ps(scales.m[j], _mm512_set1_ps(xb.s), acc);
  }
}

// out[r] = dot(row r, x) for the 16 rows from w (row stride row_bytes).
template <class F>
void HalvesTile16(const uint8_t* w, size_t row_bytes, int64_t num_blocks, const BlockQ8* x,
                  size_t distance, __m512i rows, float* out) {
  ForSuperBlocks<F>(
      w, num_blocks, distance, rows, out,
      [&](const uint8_t* block, const typename F::Scales& scales, int64_t b, __m512& acc)
          __attribute__((always_inline)) {
            HalfStep<F, 0>(block, row_bytes, x + 8 * b, scales, acc);
            HalfStep<F, 1>(block, row_bytes, x + 8 * b, scales, acc);
          });
}

// ---------------------------------------------------------------------------
// The block-pair tile (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0): one row per zmm, holding two
// 32-element blocks b and b + 1; as HalvesTile16, rows are folded in pairs on
// the codes, then in fours (Fold64), and SumChunkPairs gives each block's
// sums with lane r = row r. A block's d (and m) are the fp16 halves of its
// first 32-bit word, gathered for the 16 rows.
//
// A format provides kBlockBytes, kOffset (the codes are q + kOffset), kMin
// (the block's m, then the float step adds m * x.s), kInterleaved, and
// Codes(row_block): the unsigned codes of blocks b and b + 1 of one row, in
// 128-bit chunks [b 0..15, b + 1 0..15, b 16..31, b + 1 16..31] if
// kInterleaved, else [b 0..15, b 16..31, b + 1 0..15, b + 1 16..31].

// Q4_0, Q4_1, Q5_0, Q5_1: 16 bytes of nibbles at p (block b) and p + kStride (b + 1),
// the low nibbles elements 0..15 and the high ones 16..31.
template <size_t kStride>
inline __m512i NibblePairCodes(const uint8_t* p) {
  const __m256i t = _mm256_inserti128_si256(
      _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))),
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + kStride)), 1);
  return _mm512_and_si512(_mm512_inserti64x4(_mm512_castsi256_si512(t), _mm256_srli_epi16(t, 4), 1),
                          _mm512_set1_epi8(0x0F));
}

// What the pair formats share: blocks of 32 elements of kBytes bytes.
template <size_t kBytes, int kCodeOffset, bool kHasMin, bool kInterleavedCodes = true>
struct PairFormat {
  static constexpr int64_t kBlockElements = 32;
  static constexpr size_t kBlockBytes = kBytes;
  static constexpr int kOffset = kCodeOffset;
  static constexpr bool kMin = kHasMin;
  static constexpr bool kInterleaved = kInterleavedCodes;
};

// Q4_0 (codes at byte 2, q - 8) and Q4_1 (codes at byte 4 after d and m).
template <size_t kBytes, size_t kCodesAt, int kCodeOffset, bool kHasMin>
struct PNibbles : PairFormat<kBytes, kCodeOffset, kHasMin> {
  static __m512i Codes(const uint8_t* block) { return NibblePairCodes<kBytes>(block + kCodesAt); }
};
using PQ4_0 = PNibbles<kQ4_0Bytes, 2, 8, false>;
using PQ4_1 = PNibbles<kQ4_1Bytes, 4, 0, true>;

// Q5_0 (qh at byte 2, q - 16) and Q5_1 (qh at byte 4 after d and m): Q4_0's
// nibbles (after qh) plus bit i of the block's 32-bit qh as bit 4 of element
// i. The two blocks' qh become one 64-bit mask in the codes' order (a delta
// swap of the middle 16-bit fields), which adds 16 to the codes it selects:
// scalar work on the integer ports, and one vector instruction.
template <size_t kBytes, size_t kQhAt, int kCodeOffset, bool kHasMin>
struct PFiveBits : PairFormat<kBytes, kCodeOffset, kHasMin> {
  static __m512i Codes(const uint8_t* block) {
    const __m512i nibbles = NibblePairCodes<kBytes>(block + kQhAt + 4);
    uint64_t high = uint64_t{LoadU32(block + kQhAt)} | uint64_t{LoadU32(block + kBytes + kQhAt)}
                                                           << 32;
    const uint64_t swap = ((high >> 16) ^ high) & 0x00000000FFFF0000ull;
    high ^= swap | (swap << 16);
    return _mm512_mask_add_epi8(nibbles, _cvtu64_mask64(high), nibbles, _mm512_set1_epi8(0x10));
  }
};
using PQ5_0 = PFiveBits<kQ5_0Bytes, 2, 16, false>;
using PQ5_1 = PFiveBits<kQ5_1Bytes, 4, 0, true>;

// Q8_0: the int8 codes + 128.
struct PQ8_0 : PairFormat<kQ8_0Bytes, 128, false, false> {
  static __m512i Codes(const uint8_t* block) {
    return _mm512_xor_si512(Load2(block + 2, block + kBlockBytes + 2),
                            _mm512_set1_epi8(static_cast<char>(0x80)));
  }
};

// x's blocks b and b + 1 in the order of F's codes.
template <class F>
inline __m512i PairActivations(const BlockQ8* x) {
  if constexpr (F::kInterleaved) {
    auto half = [&](int e) {
      return _mm256_inserti128_si256(
          _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x[0].q + e))),
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[1].q + e)), 1);
    };
    return _mm512_inserti64x4(_mm512_castsi256_si512(half(0)), half(16), 1);
  } else {
    return Load2(reinterpret_cast<const uint8_t*>(x[0].q),
                 reinterpret_cast<const uint8_t*>(x[1].q));
  }
}

// out[r] = dot(row r, x) for the 16 rows from w (row stride row_bytes), of
// num_blocks (even) blocks.
template <class F>
void PairTile16(const uint8_t* w, size_t row_bytes, int64_t num_blocks, const BlockQ8* x,
                size_t distance, __m512i rows, float* out) {
  __m512 acc = _mm512_setzero_ps();
  for (int64_t b = 0; b < num_blocks; b += 2) {
    PrefetchRowsAhead<F>(w, distance, b);
    PrefetchRowsAhead<F>(w, distance, b + 1);
    const uint8_t* const block = w + b * F::kBlockBytes;
    const __m512i head[2] = {GatherWord<0>(block, rows),
                             GatherWord<static_cast<int>(F::kBlockBytes)>(block, rows)};
    const __m512i act = PairActivations<F>(x + b);
    const __m512i swapped = SwapPairs(act);
    const __m512i start = ChainStart<F::kOffset>(act, swapped);
    __m512i g[4];  // rows 4q..4q + 3, per chunk
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) {
      __m512i codes[4];
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) {
        codes[i] = F::Codes(block + static_cast<size_t>(4 * q + i) * row_bytes);
      }
      g[q] = Fold64(FoldRowPair(codes[0], codes[1], start, act, swapped),
                    FoldRowPair(codes[2], codes[3], start, act, swapped));
    }
    __m512i isum[2];
    SumChunkPairs<F::kInterleaved>(g, isum);
#pragma GCC unroll 2
    for (int k = 0; k < 2; ++k) {
      const BlockQ8& xb = x[b + k];
      acc = _mm512_fmadd_ps(_mm512_mul_ps(HalfOf<false>(head[k]), _mm512_set1_ps(xb.d)),
                            _mm512_cvtepi32_ps(isum[k]), acc);
      if constexpr (F::kMin)
        acc = _mm512_fmadd_ps(HalfOf<true>(head[k]), _mm512_set1_ps(xb.s), acc);
    }
  }
  _mm512_storeu_ps(out, acc);
}

// Elements of F's blocks: F::kBlockElements, or a K-quant super-block.
template <class F>
constexpr int64_t BlockElements() {
  if constexpr (requires { F::kBlockElements; }) {
    return F::kBlockElements;
  } else {
    return kSuperBlock;
  }
}

template <class F, void (*kTile)(const uint8_t*, size_t, int64_t, const BlockQ8*, size_t, __m512i,
                                 float*) = DecodeTile16<F>>
void DecodeRows(const uint8_t* w, size_t row_bytes, int64_t n, int64_t r0, int64_t r1,
                const BlockQ8* x, float* out) {
  const int64_t num_blocks = n / BlockElements<F>();
  const __m512i rows =
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_epi32(static_cast<int>(row_bytes)));
  // The rows that no tile before them prefetches: the first tile's into L1,
  // the others into L2 (as the tiles' own prefetches; into L1 they would
  // evict the first). The distance is computed here, once, and passed in:
  // computed in the tiles' loop (a conditional on row_bytes), it ran the
  // pair tile at half speed (a code-generation effect, not taken apart).
  const size_t first_end = static_cast<size_t>(std::min(r1, r0 + kTileRows)) * row_bytes;
  const size_t distance = PrefetchDistance(row_bytes);
  const size_t lead_end =
      std::min(static_cast<size_t>(r1) * row_bytes, static_cast<size_t>(r0) * row_bytes + distance);
  for (size_t off = static_cast<size_t>(r0) * row_bytes; off < lead_end; off += 64) {
    if (off < first_end) {
      _mm_prefetch(reinterpret_cast<const char*>(w + off), _MM_HINT_T0);
    } else {
      _mm_prefetch(reinterpret_cast<const char*>(w + off), _MM_HINT_T1);
    }
  }
  for (int64_t r = r0; r < r1; r += kTileRows) {
    kTile(w + static_cast<size_t>(r) * row_bytes, row_bytes, num_blocks, x, distance, rows,
          out + r);
  }
}

// The one-token kernel of `type` for rows of n elements, or nullptr.
using DecodeFn = void (*)(const uint8_t*, size_t, int64_t, int64_t, int64_t, const BlockQ8*,
                          float*);
DecodeFn DecodeKernel(TensorType type, int64_t n) {
  // The pair tile takes blocks two at a time.
  const bool pairs = n % 64 == 0;
  switch (type) {
    case TensorType::kQ4_0:
      return pairs ? DecodeRows<PQ4_0, PairTile16<PQ4_0>> : nullptr;
    case TensorType::kQ4_1:
      return pairs ? DecodeRows<PQ4_1, PairTile16<PQ4_1>> : nullptr;
    case TensorType::kQ5_0:
      return pairs ? DecodeRows<PQ5_0, PairTile16<PQ5_0>> : nullptr;
    case TensorType::kQ5_1:
      return pairs ? DecodeRows<PQ5_1, PairTile16<PQ5_1>> : nullptr;
    case TensorType::kQ8_0:
      // Rows shorter than 1024 stay on the AVX2 tile: on the pair tile,
      // Gemma 3's LM head (640 columns, 70 % of its weights) made its decode
      // ~5 % slower, though BM_DecodeCold has the pair tile ahead there.
      return pairs && n >= 1024 ? DecodeRows<PQ8_0, PairTile16<PQ8_0>> : nullptr;
    case TensorType::kQ4_K:
      return DecodeRows<DQ4_K, HalvesTile16<DQ4_K>>;
    case TensorType::kQ5_K:
      return DecodeRows<DQ5_K, HalvesTile16<DQ5_K>>;
    case TensorType::kQ6_K:
      return DecodeRows<DQ6_K, HalvesTile16<DQ6_K>>;
    case TensorType::kQ3_K:
      return DecodeRows<DQ3_K>;
    case TensorType::kQ2_K:
      return DecodeRows<DQ2_K>;
    default:
      return nullptr;
  }
}

}  // namespace

int64_t MatVecAvx512Vnni(TensorType type, const uint8_t* w, size_t row_bytes, int64_t n, int64_t r0,
                         int64_t r1, const BlockQ8* x, float* out) {
  const int64_t rows = (r1 - r0) / kTileRows * kTileRows;
  const DecodeFn decode = DecodeKernel(type, n);
  // The gathers' offsets (15 rows) must fit in int32.
  if (rows == 0 || decode == nullptr ||
      row_bytes > static_cast<size_t>(std::numeric_limits<int32_t>::max() / kTileRows)) {
    return 0;
  }
  decode(w, row_bytes, n, r0, r0 + rows, x, out);
  return rows;
}

}  // namespace llm::kernels::internal
