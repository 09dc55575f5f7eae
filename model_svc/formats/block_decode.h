// Scalar decoding of the quantized blocks (blocks.h) into integer codes
// plus float scales, one decoder per format: the reference dequantization
// (dequantize.cc) and the CPU kernels' scalar dot products (kernels/quant.cc)
// share them, so a block means the same to both.
//
// Each decoder writes the 32 codes q[32] of one 32-element (sub-)block as
// ints: element l is scale * q[l] (- min), or, for the formats with a scale
// per 16 elements (Q6_K, Q3_K, Q2_K), scale_lo * q[l] for l < 16 and
// scale_hi * q[l] after.
//
// Internal linkage (an unnamed namespace), as in kernels/quant_x86_formats.h:
// every file that includes this compiles its own copy with its own target
// flags, so no copy built for AVX can serve code that runs on any CPU.
#ifndef LLM_MODEL_SVC_FORMATS_BLOCK_DECODE_H_
#define LLM_MODEL_SVC_FORMATS_BLOCK_DECODE_H_

#include <cstdint>

#include "model_svc/formats/blocks.h"

namespace llm::formats {
namespace {  // NOLINT(build/namespaces): one copy per including file, see above

// Q4_0 / Q4_1 nibbles: low nibbles are elements 0..15, high nibbles 16..31.
inline void DecodeNibbles(const uint8_t* qs, int offset, int q[32]) {
  for (int j = 0; j < 16; ++j) {
    q[j] = (qs[j] & 0x0F) - offset;
    q[j + 16] = (qs[j] >> 4) - offset;
  }
}

// Q5_0 / Q5_1: nibbles plus bit k of qh as the 5th bit of element k.
inline void DecodeFiveBits(const uint8_t* qh_bytes, const uint8_t* qs, int offset, int q[32]) {
  const uint32_t qh = LoadU32(qh_bytes);
  for (int j = 0; j < 16; ++j) {
    q[j] = ((qs[j] & 0x0F) | static_cast<int>(((qh >> j) & 1u) << 4)) - offset;
    q[j + 16] = ((qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4)) - offset;
  }
}

// Q4_K sub-block j (0..7) of super-block `b`: 4-bit q with scale d*sc and
// min dmin*mn, y = (d*sc) * q - (dmin*mn).
inline void DecodeQ4K(const uint8_t* b, int j, int q[32], float* scale, float* min) {
  int sc, mn;
  Q4KScaleMin(b + 4, j, &sc, &mn);
  *scale = Half(b) * static_cast<float>(sc);
  *min = Half(b + 2) * static_cast<float>(mn);
  const uint8_t* qs = b + 16 + 32 * (j / 2);
  const int shift = (j % 2) * 4;
  for (int l = 0; l < 32; ++l) q[l] = (qs[l] >> shift) & 0x0F;
}

// Q6_K elements 32j..32j+31 of super-block `b` (j = 0..7) as signed q in
// [-32, 31]; their scales are the int8 scales[2j] (first 16) and [2j+1].
inline void DecodeQ6K(const uint8_t* b, int j, int q[32]) {
  const int h = j / 4;  // 128-element half
  const int k = j % 4;  // 32-element quarter of the half
  const uint8_t* ql = b + 64 * h + 32 * (k % 2);
  const uint8_t* qh = b + 128 + 32 * h;
  const int low_shift = (k / 2) * 4;
  const int high_shift = 2 * k;
  for (int l = 0; l < 32; ++l) {
    q[l] = (((ql[l] >> low_shift) & 0x0F) | (((qh[l] >> high_shift) & 3) << 4)) - 32;
  }
}

inline int8_t Q6KScale(const uint8_t* b, int i) { return static_cast<int8_t>(b[192 + i]); }

// Q5_K sub-block j (0..7) of super-block `b`: Q4_K's nibbles and scales plus
// bit j of qh[l] as the 5th bit of element l; y = (d*sc) * q - (dmin*mn).
inline void DecodeQ5K(const uint8_t* b, int j, int q[32], float* scale, float* min) {
  int sc, mn;
  Q4KScaleMin(b + 4, j, &sc, &mn);
  *scale = Half(b) * static_cast<float>(sc);
  *min = Half(b + 2) * static_cast<float>(mn);
  const uint8_t* qh = b + 16;
  const uint8_t* qs = b + 48 + 32 * (j / 2);
  const int shift = (j % 2) * 4;
  for (int l = 0; l < 32; ++l) q[l] = ((qs[l] >> shift) & 0x0F) | (((qh[l] >> j) & 1) << 4);
}

// Q2_K / Q3_K 2-bit codes of elements 32j..32j+31 (j = 0..7): 128-element
// half h = j / 4 uses qs[32h..32h+32), bits 2 * (j % 4).
inline void DecodeTwoBits(const uint8_t* qs, int j, int q[32]) {
  const uint8_t* p = qs + 32 * (j / 4);
  const int shift = 2 * (j % 4);
  for (int l = 0; l < 32; ++l) q[l] = (p[l] >> shift) & 3;
}

// Q3_K elements 32j..32j+31 as signed q in [-4, 3]: the 2-bit code minus 4
// unless bit j of hmask[l] is set.
inline void DecodeQ3K(const uint8_t* b, int j, int q[32]) {
  DecodeTwoBits(b + 32, j, q);
  for (int l = 0; l < 32; ++l) q[l] -= ((b[l] >> j) & 1) != 0 ? 0 : 4;
}

// IQ4_NL / IQ4_XS: 16 bytes of indices into kIQ4NLValues, low nibbles
// elements 0..15, high nibbles 16..31.
inline void DecodeIQ4(const uint8_t* qs, int q[32]) {
  for (int l = 0; l < 16; ++l) {
    q[l] = kIQ4NLValues[qs[l] & 0x0F];
    q[l + 16] = kIQ4NLValues[qs[l] >> 4];
  }
}

}  // namespace
}  // namespace llm::formats

#endif  // LLM_MODEL_SVC_FORMATS_BLOCK_DECODE_H_
