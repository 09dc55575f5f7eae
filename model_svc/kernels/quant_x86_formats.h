// x86 SIMD decoding of the quantized weight blocks and interleaving of the
// activation blocks, shared by the AVX2 and the AVX-512 VNNI kernels
// (quant_avx2.cc, quant_avx512.cc, quant_avx512_decode.cc).
//
// Everything here has internal linkage (an unnamed namespace): each kernel
// file compiles its own copy with its own target flags, so that no function
// built with AVX-512 instructions can be chosen by the linker for the AVX2
// kernels (which must run on CPUs without AVX-512). Include this header only
// from files compiled with at least -mavx2 -mfma -mf16c.
#ifndef LLM_MODEL_SVC_KERNELS_QUANT_X86_FORMATS_H_
#define LLM_MODEL_SVC_KERNELS_QUANT_X86_FORMATS_H_

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "model_svc/kernels/quant_internal.h"

namespace llm::kernels::internal {
namespace {  // NOLINT(build/namespaces): one copy per kernel file, see above

// ---------------------------------------------------------------------------
// Small helpers.

// max |x[l]| over a block of 32 floats, in QuantizeQ8Avx2's order (so that a
// NaN fares alike in every kernel that uses it).
inline float BlockAbsMax(const float* xb) {
  const __m256 sign_mask = _mm256_set1_ps(-0.0f);
  __m256 m = _mm256_andnot_ps(sign_mask, _mm256_loadu_ps(xb));
  for (int i = 1; i < 4; ++i) {
    m = _mm256_max_ps(m, _mm256_andnot_ps(sign_mask, _mm256_loadu_ps(xb + 8 * i)));
  }
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  return _mm_cvtss_f32(m4);
}

// [fp16 at p, 0, 0, 0] and [fp16 at p, fp16 at p + 2, 0, 0] as floats.
inline __m128 LoadHalf1(const uint8_t* p) {
  return _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(LoadU16(p))));
}
inline __m128 LoadHalf2(const uint8_t* p) {
  return _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(LoadU32(p))));
}

// Prefetch distance of the tiles' weight streams, in rows.
constexpr int64_t kPrefetchRows = 16;

// A row tile reads its rows as several short interleaved streams, which the
// hardware prefetchers follow badly when the weights come from DRAM (decode,
// or a large matrix such as the LM head): prefetch the rows kPrefetchRows
// ahead (rows are contiguous) at the pace the tile reads its own, kStep
// bytes per block b, as one sequential stream. Prefetches never fault:
// running past the matrix is harmless.
template <size_t kStep>
inline void PrefetchAhead(const uint8_t* w, size_t row_bytes, int64_t b) {
  const uintptr_t p = reinterpret_cast<uintptr_t>(w) + kPrefetchRows * row_bytes + b * kStep;
  for (size_t off = 0; off < kStep + 63; off += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(p + off), _MM_HINT_T0);
  }
}

inline __m256i LoadBytes32(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}

// The codes of 8 activation blocks, interleaved by 4-element groups: the
// 8 x 8 dword transpose of x[t]->q (row t = token t's 32 bytes), so that
// g[i] is group i, its dword lane t token t's elements 4i..4i+3.
[[gnu::always_inline]] inline void TransposeGroups8(const BlockQ8* const* x, __m256* g) {
  __m256 v[8];
#pragma GCC unroll 8
  for (int t = 0; t < 8; ++t) v[t] = _mm256_castsi256_ps(LoadBytes32(x[t]->q));
  const __m256 a0 = _mm256_unpacklo_ps(v[0], v[1]), a1 = _mm256_unpackhi_ps(v[0], v[1]);
  const __m256 a2 = _mm256_unpacklo_ps(v[2], v[3]), a3 = _mm256_unpackhi_ps(v[2], v[3]);
  const __m256 a4 = _mm256_unpacklo_ps(v[4], v[5]), a5 = _mm256_unpackhi_ps(v[4], v[5]);
  const __m256 a6 = _mm256_unpacklo_ps(v[6], v[7]), a7 = _mm256_unpackhi_ps(v[6], v[7]);
  const __m256 b0 = _mm256_shuffle_ps(a0, a2, 0x44), b1 = _mm256_shuffle_ps(a0, a2, 0xEE);
  const __m256 b2 = _mm256_shuffle_ps(a1, a3, 0x44), b3 = _mm256_shuffle_ps(a1, a3, 0xEE);
  const __m256 b4 = _mm256_shuffle_ps(a4, a6, 0x44), b5 = _mm256_shuffle_ps(a4, a6, 0xEE);
  const __m256 b6 = _mm256_shuffle_ps(a5, a7, 0x44), b7 = _mm256_shuffle_ps(a5, a7, 0xEE);
  g[0] = _mm256_permute2f128_ps(b0, b4, 0x20);
  g[1] = _mm256_permute2f128_ps(b1, b5, 0x20);
  g[2] = _mm256_permute2f128_ps(b2, b6, 0x20);
  g[3] = _mm256_permute2f128_ps(b3, b7, 0x20);
  g[4] = _mm256_permute2f128_ps(b0, b4, 0x31);
  g[5] = _mm256_permute2f128_ps(b1, b5, 0x31);
  g[6] = _mm256_permute2f128_ps(b2, b6, 0x31);
  g[7] = _mm256_permute2f128_ps(b3, b7, 0x31);
}

// The scales of 8 activation blocks: *d = [x[0]->d .. x[7]->d], *s the same
// of s (each token's [d, s] pair is 8 adjacent bytes).
[[gnu::always_inline]] inline void LoadScales8(const BlockQ8* const* x, __m256* d, __m256* s) {
  __m128i ds[8];
#pragma GCC unroll 8
  for (int t = 0; t < 8; ++t) ds[t] = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(&x[t]->d));
  const __m256 p = _mm256_castsi256_ps(  // d0 s0 d1 s1 | d4 s4 d5 s5
      _mm256_set_m128i(_mm_unpacklo_epi64(ds[4], ds[5]), _mm_unpacklo_epi64(ds[0], ds[1])));
  const __m256 q = _mm256_castsi256_ps(  // d2 s2 d3 s3 | d6 s6 d7 s7
      _mm256_set_m128i(_mm_unpacklo_epi64(ds[6], ds[7]), _mm_unpacklo_epi64(ds[2], ds[3])));
  *d = _mm256_shuffle_ps(p, q, 0x88);
  *s = _mm256_shuffle_ps(p, q, 0xDD);
}

// 16 bytes of packed nibbles -> 32 lanes: low nibbles of bytes 0..15 are lanes
// 0..15, high nibbles lanes 16..31 (the Q4_0/Q4_1/Q5_x element order).
inline __m256i SplitNibbles(const uint8_t* qs) {
  // A broadcast load, one shift and a blend: one shuffle-port uop fewer than
  // shifting 128 bits and inserting them.
  const __m256i b =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
  const __m256i v = _mm256_blend_epi32(b, _mm256_srli_epi16(b, 4), 0xF0);
  return _mm256_and_si256(v, _mm256_set1_epi8(0x0F));
}

// Bit k of the little-endian u32 at `qh` -> 0x10 in lane k (the 5th bit of
// Q5_0/Q5_1 element k), 0 otherwise.
inline __m256i FifthBits(const uint8_t* qh) {
  const __m256i bytes = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(LoadU32(qh))),
      _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit);
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

// ---------------------------------------------------------------------------
// Formats.
//
// Each format provides:
//   kSubBlocks, kBlockBytes: 32-element blocks per weight block, its bytes;
//   kSigned: lanes are signed (Q8_0, Q6_K): vpmaddubsw gets |q| and the
//     activations take the signs of q; otherwise lanes are unsigned;
//   kOffset: unsigned lanes hold q + kOffset (Q4_0: 8, Q5_0: 16, Q3_K: 4);
//     the kernels subtract kOffset * sum(x.q), so the integer sum is exactly
//     that of the signed codes, as in the scalar code;
//   kSubScales (optional, default false): an offset format whose halves have
//     their own sub-scales (Q3_K), so the offset must come off the int16
//     sums of each half, before their sub-scales multiply them;
//   kMin: the block adds `m` to every weight (w = d * q + m), which adds the
//     float term m * x.s per block;
//   kHalfHeader: the block starts with d as fp16, then (kMin formats) m;
//   kGroupsPerMadd: 4-element groups whose vpmaddubsw sums fit in int16;
//   Header Prepare(const uint8_t* block): what the sub-blocks share;
//   WeightBlock Unpack(const Header&, int j): sub-block j;
//   kPasses (optional, default 1): sub-blocks per 32 activations. Q2_K has
//     2: sub-block 2i is block i's codes, 2i + 1 its min step (all-ones codes
//     with the mins as sub-scales and -dmin as d), which the kernels run as
//     a second block step on the same activations (quant.h); RowTokenTile
//     and Token8Tile form that step's integer sum from the activations' half
//     sums and F::MinPairs instead (OneRowTile and dequantization do not).
//
// Decoding tables and bit positions follow ggml's block layouts
// (formats/blocks.h lists them).

struct WeightBlock {
  __m256i q;  // 32 lanes, element order
  __m128 dm;  // [scale d, additive min m (kMin formats), unused, unused]
  // int16 integer sub-scales (Q6_K; 1 otherwise): that of elements 0..15 in
  // lanes 0..7, that of elements 16..31 in lanes 8..15 (vpmaddwd multipliers
  // for the vpmaddubsw pairs of a whole block).
  __m256i sub_scales = _mm256_set1_epi16(1);
};

struct Q4_0 {
  static constexpr int kSubBlocks = 1;
  static constexpr size_t kBlockBytes = kQ4_0Bytes;
  static constexpr bool kSigned = false;
  static constexpr int kOffset = 8;
  static constexpr bool kMin = false;
  static constexpr bool kHalfHeader = true;
  static constexpr int kGroupsPerMadd = 8;
  using Header = const uint8_t*;
  static Header Prepare(const uint8_t* p) { return p; }
  static WeightBlock Unpack(Header p, int) { return {SplitNibbles(p + 2), LoadHalf1(p)}; }
};

struct Q4_1 {
  static constexpr int kSubBlocks = 1;
  static constexpr size_t kBlockBytes = kQ4_1Bytes;
  static constexpr bool kSigned = false;
  static constexpr int kOffset = 0;
  static constexpr bool kMin = true;
  static constexpr bool kHalfHeader = true;
  static constexpr int kGroupsPerMadd = 8;
  using Header = const uint8_t*;
  static Header Prepare(const uint8_t* p) { return p; }
  static WeightBlock Unpack(Header p, int) { return {SplitNibbles(p + 4), LoadHalf2(p)}; }
};

struct Q5_0 {
  static constexpr int kSubBlocks = 1;
  static constexpr size_t kBlockBytes = kQ5_0Bytes;
  static constexpr bool kSigned = false;
  static constexpr int kOffset = 16;
  static constexpr bool kMin = false;
  static constexpr bool kHalfHeader = true;
  static constexpr int kGroupsPerMadd = 4;
  using Header = const uint8_t*;
  static Header Prepare(const uint8_t* p) { return p; }
  static WeightBlock Unpack(Header p, int) {
    return {_mm256_or_si256(SplitNibbles(p + 6), FifthBits(p + 2)), LoadHalf1(p)};
  }
};

struct Q5_1 {
  static constexpr int kSubBlocks = 1;
  static constexpr size_t kBlockBytes = kQ5_1Bytes;
  static constexpr bool kSigned = false;
  static constexpr int kOffset = 0;
  static constexpr bool kMin = true;
  static constexpr bool kHalfHeader = true;
  static constexpr int kGroupsPerMadd = 4;
  using Header = const uint8_t*;
  static Header Prepare(const uint8_t* p) { return p; }
  static WeightBlock Unpack(Header p, int) {
    return {_mm256_or_si256(SplitNibbles(p + 8), FifthBits(p + 4)), LoadHalf2(p)};
  }
};

struct Q8_0 {
  static constexpr int kSubBlocks = 1;
  static constexpr size_t kBlockBytes = kQ8_0Bytes;
  static constexpr bool kSigned = true;
  static constexpr int kOffset = 0;
  static constexpr bool kMin = false;
  static constexpr bool kHalfHeader = true;
  static constexpr int kGroupsPerMadd = 1;
  using Header = const uint8_t*;
  static Header Prepare(const uint8_t* p) { return p; }
  static WeightBlock Unpack(Header p, int) { return {LoadBytes32(p + 2), LoadHalf1(p)}; }
};

struct Q4_K {
  static constexpr int kSubBlocks = 8;
  static constexpr size_t kBlockBytes = kQ4_KBytes;
  static constexpr bool kSigned = false;
  static constexpr int kOffset = 0;
  static constexpr bool kMin = true;
  static constexpr bool kHalfHeader = false;
  static constexpr int kGroupsPerMadd = 8;
  struct Header {
    const uint8_t* qs;
    float dm[8][2];  // sub-block j: d * sc[j], -dmin * mn[j]
  };
  static Header Prepare(const uint8_t* p) {
    // The 12 scale bytes rearranged into sc[0..7] then mn[0..7] (Q4KScaleMin
    // for all j at once, with 32-bit words).
    uint32_t u[4];
    std::memcpy(u, p + 4, 12);
    u[3] = ((u[2] >> 4) & 0x0F0F0F0F) | (((u[1] >> 6) & 0x03030303) << 4);
    const uint32_t mins_lo = u[1] & 0x3F3F3F3F;
    u[1] = (u[2] & 0x0F0F0F0F) | (((u[0] >> 6) & 0x03030303) << 4);
    u[2] = mins_lo;
    u[0] &= 0x3F3F3F3F;
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(u));
    const __m128 d = LoadHalf2(p);  // [d, dmin]
    const __m256 sc =
        _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes)), _mm256_broadcastss_ps(d));
    const __m256 mn =
        _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(bytes, 8))),
                      _mm256_broadcastss_ps(_mm_sub_ps(_mm_setzero_ps(), _mm_movehdup_ps(d))));
    // Interleave to [d*sc[j], -dmin*mn[j]] pairs in j order.
    const __m256 lo = _mm256_unpacklo_ps(sc, mn), hi = _mm256_unpackhi_ps(sc, mn);
    Header h;
    h.qs = p + 16;
    _mm256_storeu_ps(h.dm[0], _mm256_permute2f128_ps(lo, hi, 0x20));
    _mm256_storeu_ps(h.dm[4], _mm256_permute2f128_ps(lo, hi, 0x31));
    return h;
  }
  // Sub-blocks 2c and 2c+1 are the low and high nibbles of qs[32c .. 32c+32).
  static WeightBlock Unpack(const Header& h, int j) {
    __m256i v = LoadBytes32(h.qs + 32 * (j >> 1));
    if (j & 1) v = _mm256_srli_epi16(v, 4);
    const __m128 dm = _mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(h.dm[j])));
    return {_mm256_and_si256(v, _mm256_set1_epi8(0x0F)), dm};
  }
};

struct Q6_K {
  static constexpr int kSubBlocks = 8;
  static constexpr size_t kBlockBytes = kQ6_KBytes;
  static constexpr bool kSigned = true;
  static constexpr int kOffset = 0;
  static constexpr bool kMin = false;
  static constexpr bool kHalfHeader = false;
  static constexpr int kGroupsPerMadd = 4;
  struct Header {
    const uint8_t* p;
    __m256i scales;  // the 16 int8 scales as int16: int32 lane j = scales 2j, 2j+1
  };
  static Header Prepare(const uint8_t* p) {
    return {p, _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 192)))};
  }
  // Elements 32j..32j+31: half h = j/4 of 128 uses ql[64h..] and qh[32h..];
  // quarter k = j%4 takes the low (k < 2) or high nibbles of ql[64h + 32(k%2)..]
  // and bits 2k..2k+1 of qh as bits 4..5. Values are q - 32 in [-32, 31].
  static WeightBlock Unpack(const Header& h, int j) {
    const uint8_t* p = h.p;
    const int half = j >> 2, k = j & 3;
    __m256i low = LoadBytes32(p + 64 * half + 32 * (k & 1));
    if (k >= 2) low = _mm256_srli_epi16(low, 4);
    low = _mm256_and_si256(low, _mm256_set1_epi8(0x0F));
    // Move qh bits 2k..2k+1 to bits 4..5; a 16-bit shift by less than 8 keeps
    // them within their byte once masked.
    __m256i high = LoadBytes32(p + 128 + 32 * half);
    if (k < 2) {
      high = _mm256_sll_epi16(high, _mm_cvtsi32_si128(4 - 2 * k));
    } else if (k == 3) {
      high = _mm256_srli_epi16(high, 2);
    }
    high = _mm256_and_si256(high, _mm256_set1_epi8(0x30));
    const __m256i q = _mm256_sub_epi8(_mm256_or_si256(low, high), _mm256_set1_epi8(32));
    // Broadcast the int16 pair (scales[2j], scales[2j+1]), then keep the first
    // in the low 128 bits and the second in the high 128 bits.
    const __m256i pair = _mm256_permutevar8x32_epi32(h.scales, _mm256_set1_epi32(j));
    const __m256i sub_scales =
        _mm256_shuffle_epi8(pair, _mm256_set_epi64x(0x0302030203020302, 0x0302030203020302,
                                                    0x0100010001000100, 0x0100010001000100));
    return {q, LoadHalf1(p + 208), sub_scales};
  }
};

// Q4_K's Header with Q5_K's 5th bits: same d, dmin and scale bytes; qh[32]
// at 16, qs[128] at 48.
struct Q5_K {
  static constexpr int kSubBlocks = 8;
  static constexpr size_t kBlockBytes = kQ5_KBytes;
  static constexpr bool kSigned = false;
  static constexpr int kOffset = 0;
  static constexpr bool kMin = true;
  static constexpr bool kHalfHeader = false;
  static constexpr int kGroupsPerMadd = 4;
  struct Header {
    Q4_K::Header k4;  // k4.qs points at qs
    const uint8_t* qh;
  };
  static Header Prepare(const uint8_t* p) {
    Header h{Q4_K::Prepare(p), p + 16};
    h.k4.qs = p + 48;
    return h;
  }
  // Q4_K's nibbles plus bit j of qh[l] moved to bit 4 of lane l (a 16-bit
  // shift by at most 4 keeps it within its byte once masked).
  static WeightBlock Unpack(const Header& h, int j) {
    WeightBlock wb = Q4_K::Unpack(h.k4, j);
    __m256i high = LoadBytes32(h.qh);
    if (j < 4) {
      high = _mm256_sll_epi16(high, _mm_cvtsi32_si128(4 - j));
    } else if (j > 4) {
      high = _mm256_srl_epi16(high, _mm_cvtsi32_si128(j - 4));
    }
    wb.q = _mm256_or_si256(wb.q, _mm256_and_si256(high, _mm256_set1_epi8(0x10)));
    return wb;
  }
};

// The pair (scales[2j], scales[2j+1]) of 16 int16 scales (int32 lane j of
// `scales`) as vpmaddwd multipliers: the first in the low 128 bits, the
// second in the high 128 bits (Q6_K, Q3_K, Q2_K).
inline __m256i HalvesScales(__m256i scales, int j) {
  const __m256i pair = _mm256_permutevar8x32_epi32(scales, _mm256_set1_epi32(j));
  return _mm256_shuffle_epi8(pair, _mm256_set_epi64x(0x0302030203020302, 0x0302030203020302,
                                                     0x0100010001000100, 0x0100010001000100));
}

// The 2-bit codes of elements 32j..32j+31 (Q2_K, Q3_K): qs[32 * (j / 4)..]
// shifted right by 2 * (j % 4), masked.
inline __m256i TwoBits(const uint8_t* qs, int j) {
  __m256i v = LoadBytes32(qs + 32 * (j >> 2));
  if ((j & 3) != 0) v = _mm256_srl_epi16(v, _mm_cvtsi32_si128(2 * (j & 3)));
  return _mm256_and_si256(v, _mm256_set1_epi8(3));
}

struct Q3_K {
  static constexpr int kSubBlocks = 8;
  static constexpr size_t kBlockBytes = kQ3_KBytes;
  static constexpr bool kSigned = false;
  static constexpr int kOffset = 4;
  static constexpr bool kSubScales = true;
  static constexpr bool kMin = false;
  static constexpr bool kHalfHeader = false;
  static constexpr int kGroupsPerMadd = 4;
  struct Header {
    const uint8_t* p;
    __m256i scales;  // the 16 scales - 32 as int16: int32 lane j = scales 2j, 2j+1
    __m128 d;        // [d, -, -, -]
  };
  static Header Prepare(const uint8_t* p) {
    // Q3KScales with 32-bit words (ggml's kmask arithmetic).
    uint32_t a[4];
    std::memcpy(a, p + 96, 12);
    const uint32_t t = a[2];
    a[2] = ((a[0] >> 4) & 0x0F0F0F0F) | (((t >> 4) & 0x03030303) << 4);
    a[3] = ((a[1] >> 4) & 0x0F0F0F0F) | (((t >> 6) & 0x03030303) << 4);
    a[0] = (a[0] & 0x0F0F0F0F) | ((t & 0x03030303) << 4);
    a[1] = (a[1] & 0x0F0F0F0F) | (((t >> 2) & 0x03030303) << 4);
    const __m128i bytes =
        _mm_sub_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a)), _mm_set1_epi8(32));
    return {p, _mm256_cvtepi8_epi16(bytes), LoadHalf1(p + 108)};
  }
  // Lanes q + 4 in [0, 7]: the 2-bit code, plus 4 where bit j of hmask[l] is
  // set (moved to bit 2; a 16-bit shift keeps it within its byte once masked).
  static WeightBlock Unpack(const Header& h, int j) {
    const __m256i low = TwoBits(h.p + 32, j);
    __m256i high = LoadBytes32(h.p);
    if (j < 2) {
      high = _mm256_sll_epi16(high, _mm_cvtsi32_si128(2 - j));
    } else if (j > 2) {
      high = _mm256_srl_epi16(high, _mm_cvtsi32_si128(j - 2));
    }
    const __m256i q = _mm256_or_si256(low, _mm256_and_si256(high, _mm256_set1_epi8(4)));
    return {q, h.d, HalvesScales(h.scales, j)};
  }
};

struct Q2_K {
  static constexpr int kSubBlocks = 16;  // 8 blocks of 32, two passes each
  static constexpr int kPasses = 2;
  static constexpr size_t kBlockBytes = kQ2_KBytes;
  static constexpr bool kSigned = false;
  static constexpr int kOffset = 0;
  static constexpr bool kMin = false;
  static constexpr bool kHalfHeader = false;
  static constexpr int kGroupsPerMadd = 4;
  struct Header {
    const uint8_t* p;
    __m256i scales;   // the 16 4-bit scales as int16 (pairs as in Q3_K)
    __m256i mins;     // the 16 4-bit mins as int16
    __m128 d;         // [d, -, -, -]
    __m128 neg_dmin;  // [-dmin, -, -, -]
  };
  static Header Prepare(const uint8_t* p) {
    const __m256i sm = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    const __m128 d = LoadHalf2(p + 80);  // [d, dmin]
    return {p, _mm256_and_si256(sm, _mm256_set1_epi16(0x0F)), _mm256_srli_epi16(sm, 4), d,
            _mm_xor_ps(_mm_movehdup_ps(d), _mm_set1_ps(-0.0f))};
  }
  // Sub-block 2i: the codes of block i with its scales; 2i + 1: ones with its
  // mins, scaled by -dmin.
  static WeightBlock Unpack(const Header& h, int j) {
    if ((j & 1) == 0) return {TwoBits(h.p + 16, j >> 1), h.d, HalvesScales(h.scales, j >> 1)};
    return {_mm256_set1_epi8(1), h.neg_dmin, HalvesScales(h.mins, j >> 1)};
  }
  // For min sub-block j (odd): the int16 pair (mn_lo, mn_hi) in every int32
  // lane, and [-dmin, ...] (Token8Tile's shortcut for the min step).
  static __m256i MinPairs(const Header& h, int j) {
    return _mm256_permutevar8x32_epi32(h.mins, _mm256_set1_epi32(j >> 1));
  }
  static __m128 MinScale(const Header& h) { return h.neg_dmin; }
};

// IQ4_NL / IQ4_XS: 16 bytes of nibbles -> their kIQ4NLValues, element order.
inline __m256i IQ4Values(const uint8_t* qs) {
  const __m256i table =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIQ4NLValues)));
  return _mm256_shuffle_epi8(table, SplitNibbles(qs));
}

struct IQ4_NL {
  static constexpr int kSubBlocks = 1;
  static constexpr size_t kBlockBytes = kIQ4_NLBytes;
  static constexpr bool kSigned = true;
  static constexpr int kOffset = 0;
  static constexpr bool kMin = false;
  static constexpr bool kHalfHeader = true;
  static constexpr int kGroupsPerMadd = 1;
  using Header = const uint8_t*;
  static Header Prepare(const uint8_t* p) { return p; }
  static WeightBlock Unpack(Header p, int) { return {IQ4Values(p + 2), LoadHalf1(p)}; }
};

struct IQ4_XS {
  static constexpr int kSubBlocks = 8;
  static constexpr size_t kBlockBytes = kIQ4_XSBytes;
  static constexpr bool kSigned = true;
  static constexpr int kOffset = 0;
  static constexpr bool kMin = false;
  static constexpr bool kHalfHeader = false;
  static constexpr int kGroupsPerMadd = 1;
  struct Header {
    const uint8_t* qs;
    float d[8];  // sub-block j: d * (ls_j - 32)
  };
  static Header Prepare(const uint8_t* p) {
    // ls_j: nibble j % 2 of scales_l[j / 2] | 2 bits 2j of scales_h << 4.
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i low =
        _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(LoadU32(p + 4))),
                                           _mm256_slli_epi32(lane, 2)),  // 4j: byte j/2, nibble j%2
                         _mm256_set1_epi32(0x0F));
    const __m256i high = _mm256_and_si256(
        _mm256_srlv_epi32(_mm256_set1_epi32(LoadU16(p + 2)), _mm256_slli_epi32(lane, 1)),
        _mm256_set1_epi32(3));
    const __m256i ls =
        _mm256_sub_epi32(_mm256_or_si256(low, _mm256_slli_epi32(high, 4)), _mm256_set1_epi32(32));
    Header h;
    h.qs = p + 8;
    _mm256_storeu_ps(h.d,
                     _mm256_mul_ps(_mm256_cvtepi32_ps(ls), _mm256_broadcastss_ps(LoadHalf1(p))));
    return h;
  }
  static WeightBlock Unpack(const Header& h, int j) {
    return {IQ4Values(h.qs + 16 * j), _mm_load_ss(&h.d[j])};
  }
};

// F::kSubScales for an offset format, false when absent.
template <class F>
constexpr bool OffsetPerHalf() {
  if constexpr (requires { F::kSubScales; }) {
    return F::kSubScales && F::kOffset != 0;
  } else {
    return false;
  }
}

// The formats whose 32-element block sum is one plain integer dot product
// of the codes (no sub-scales per 16 elements, one sub-block per 32
// activations): the VNNI tiles' (quant_avx512.cc) and the AMX tiles'
// (quant_amx.cc).
template <class F>
constexpr bool kOneSumFormat =
    std::is_same_v<F, Q4_0> || std::is_same_v<F, Q4_1> || std::is_same_v<F, Q5_0> ||
    std::is_same_v<F, Q5_1> || std::is_same_v<F, Q8_0> || std::is_same_v<F, Q4_K> ||
    std::is_same_v<F, Q5_K> || std::is_same_v<F, IQ4_NL> || std::is_same_v<F, IQ4_XS>;

// Sub-blocks of F per 32 activations (F::kPasses, 1 when absent).
template <class F>
constexpr int Passes() {
  if constexpr (requires { F::kPasses; }) {
    return F::kPasses;
  } else {
    return 1;
  }
}

}  // namespace
}  // namespace llm::kernels::internal

#endif  // LLM_MODEL_SVC_KERNELS_QUANT_X86_FORMATS_H_
