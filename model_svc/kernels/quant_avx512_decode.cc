// AVX-512 VNNI one-token kernels for the K-quants (Q2_K to Q6_K). This
// file is compiled with -mavx512f -mavx512bw -mavx512vl -mavx512vnni -mavx2
// -mfma -mf16c -ffp-contract=off; nothing in it may run before quant.cc has
// checked CpuHasAvx512Vnni().
//
// Decode reads every weight once per token, so it should run at the memory's
// pace; the AVX2 RowTokenTile spends about one instruction per weight byte on
// a K-quant (unpacking the 6-bit scales row by row, a reduction tree per
// 8 rows and sub-block), which on two cores is below the read bandwidth.
// DecodeTile16 takes 16 rows at once, one row per zmm lane in the float step:
//
//  * the scales of a super-block are unpacked for all 16 rows together, the
//    rows' headers gathered into the lanes (vpgatherdd), so each lane holds
//    its row's d * sc_j and -dmin * mn_j (or its sub-scales and mins);
//  * per 32-element sub-block, each zmm holds two rows' codes (256 bits
//    each), vpdpbusd adds 4 products per int32 lane (8 partial sums a row),
//    and a tree of blends and shuffles (3 levels, 21 instructions for 16 rows)
//    ends with the rows' exact sums of elements 0..15 and 16..31 in their
//    lanes; Q2_K, Q3_K and Q6_K multiply those by their sub-scales;
//  * the canonical float step (quant.h) then runs once for all 16 lanes.
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
// Tiles ahead that DecodeTile16 prefetches into L2.
constexpr int kPrefetchTiles = 1;

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

inline void PrepareKScalesMins(const uint8_t* block, __m512i rows, KScalesMins* s) {
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

// Q4_K: sub-blocks 2c and 2c + 1 are the low and high nibbles of qs[32c..].
inline __m512i NibbleCodes(const uint8_t* qa, const uint8_t* qb, int j) {
  __m512i v = Load2(qa + 32 * (j >> 1), qb + 32 * (j >> 1));
  if ((j & 1) != 0) v = _mm512_srli_epi16(v, 4);
  return _mm512_and_si512(v, _mm512_set1_epi8(0x0F));
}

struct DQ4_K {
  static constexpr size_t kBlockBytes = kQ4_KBytes;
  static constexpr int kOffset = 0;
  static constexpr bool kSubScales = false;
  static constexpr bool kMin = true;
  using Scales = KScalesMins;
  static void Prepare(const uint8_t* block, __m512i rows, Scales* s) {
    PrepareKScalesMins(block, rows, s);
  }
  static __m512i Codes(const uint8_t* a, const uint8_t* b, int j) {
    return NibbleCodes(a + 16, b + 16, j);
  }
};

struct DQ5_K {
  static constexpr size_t kBlockBytes = kQ5_KBytes;
  static constexpr int kOffset = 0;
  static constexpr bool kSubScales = false;
  static constexpr bool kMin = true;
  using Scales = KScalesMins;
  static void Prepare(const uint8_t* block, __m512i rows, Scales* s) {
    PrepareKScalesMins(block, rows, s);
  }
  // Q4_K's nibbles (qs at 48) plus bit j of qh[l] (qh at 16) as bit 4.
  static __m512i Codes(const uint8_t* a, const uint8_t* b, int j) {
    return _mm512_or_si512(NibbleCodes(a + 48, b + 48, j), MoveBit(Load2(a + 16, b + 16), j, 4));
  }
};

struct DQ6_K {
  static constexpr size_t kBlockBytes = kQ6_KBytes;
  static constexpr int kOffset = 32;
  static constexpr bool kSubScales = true;
  static constexpr bool kMin = false;
  struct Scales {
    __m512 d;
    __m512i lo[8], hi[8];  // the int8 scales 2j and 2j + 1
  };
  static void Prepare(const uint8_t* block, __m512i rows, Scales* s) {
    s->d = HalfOf<true>(GatherWord<206>(block, rows));  // scales[14..15] | d
    const __m512i w[4] = {GatherWord<192>(block, rows), GatherWord<196>(block, rows),
                          GatherWord<200>(block, rows), GatherWord<204>(block, rows)};
    SubBlockPairs(w, SignedByteOf, s->lo, s->hi);
  }
  // Q6_K::Unpack's codes (quant_x86_formats.h) without the - 32: q in [0, 63].
  static __m512i Codes(const uint8_t* a, const uint8_t* b, int j) {
    const int half = j >> 2, k = j & 3;
    __m512i low = Load2(a + 64 * half + 32 * (k & 1), b + 64 * half + 32 * (k & 1));
    if (k >= 2) low = _mm512_srli_epi16(low, 4);
    low = _mm512_and_si512(low, _mm512_set1_epi8(0x0F));
    __m512i high = Load2(a + 128 + 32 * half, b + 128 + 32 * half);
    if (k < 2) {
      high = _mm512_slli_epi16(high, 4 - 2 * k);
    } else if (k == 3) {
      high = _mm512_srli_epi16(high, 2);
    }
    return _mm512_or_si512(low, _mm512_and_si512(high, _mm512_set1_epi8(0x30)));
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
  static void Prepare(const uint8_t* block, __m512i rows, Scales* s) {
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
  static void Prepare(const uint8_t* block, __m512i rows, Scales* s) {
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

// out[r] = dot(row r, x) for the 16 rows from w (row stride row_bytes).
template <class F>
void DecodeTile16(const uint8_t* w, size_t row_bytes, int64_t num_blocks, const BlockQ8* x,
                  __m512i rows, float* out) {
  __m512 acc = _mm512_setzero_ps();
  for (int64_t b = 0; b < num_blocks; ++b) {
    // The next tile's rows, into L2: a tile of Q6_K rows of 2048 columns is
    // 27 KB, and prefetched into L1 it would evict the current one.
    const uintptr_t next = reinterpret_cast<uintptr_t>(w) + kPrefetchTiles * kTileRows * row_bytes +
                           b * (kTileRows * F::kBlockBytes);
    for (size_t off = 0; off < kTileRows * F::kBlockBytes + 63; off += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(next + off), _MM_HINT_T1);
    }
    const uint8_t* const block = w + b * F::kBlockBytes;
    typename F::Scales scales;
    F::Prepare(block, rows, &scales);
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
  }
  _mm512_storeu_ps(out, acc);
}

template <class F>
void DecodeRows(const uint8_t* w, size_t row_bytes, int64_t n, int64_t r0, int64_t r1,
                const BlockQ8* x, float* out) {
  const int64_t num_blocks = n / kSuperBlock;
  const __m512i rows =
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_epi32(static_cast<int>(row_bytes)));
  // The first tile's rows, which no tile prefetches.
  const size_t lead_end =
      static_cast<size_t>(std::min(r1, r0 + (kPrefetchTiles + 1) * kTileRows)) * row_bytes;
  for (size_t off = static_cast<size_t>(r0) * row_bytes; off < lead_end; off += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(w + off), _MM_HINT_T0);
  }
  for (int64_t r = r0; r < r1; r += kTileRows) {
    DecodeTile16<F>(w + static_cast<size_t>(r) * row_bytes, row_bytes, num_blocks, x, rows,
                    out + r);
  }
}

}  // namespace

int64_t MatVecAvx512Vnni(TensorType type, const uint8_t* w, size_t row_bytes, int64_t n, int64_t r0,
                         int64_t r1, const BlockQ8* x, float* out) {
  const int64_t rows = (r1 - r0) / kTileRows * kTileRows;
  // The gathers' offsets (15 rows) must fit in int32.
  if (rows == 0 ||
      row_bytes > static_cast<size_t>(std::numeric_limits<int32_t>::max() / kTileRows)) {
    return 0;
  }
  switch (type) {
    case TensorType::kQ4_K:
      DecodeRows<DQ4_K>(w, row_bytes, n, r0, r0 + rows, x, out);
      return rows;
    case TensorType::kQ5_K:
      DecodeRows<DQ5_K>(w, row_bytes, n, r0, r0 + rows, x, out);
      return rows;
    case TensorType::kQ6_K:
      DecodeRows<DQ6_K>(w, row_bytes, n, r0, r0 + rows, x, out);
      return rows;
    case TensorType::kQ3_K:
      DecodeRows<DQ3_K>(w, row_bytes, n, r0, r0 + rows, x, out);
      return rows;
    case TensorType::kQ2_K:
      DecodeRows<DQ2_K>(w, row_bytes, n, r0, r0 + rows, x, out);
      return rows;
    default:
      return 0;
  }
}

}  // namespace llm::kernels::internal
