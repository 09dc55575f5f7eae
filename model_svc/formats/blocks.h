// The ggml block layouts of the quantized weight formats (GGUF.md §4): what
// the bytes of one block hold and the helpers that read their packed fields.
// The CPU kernels, the reference dequantization (dequantize.h) and, through
// it, the CUDA backend's weight upload all read blocks by these.
//
// A format's row of n elements is n / block-elements blocks back to back
// (weight_formats.h: BlockElements, RowBytes); all fields are little-endian
// and unaligned. Every format's scales cover 32 elements (a sub-block) or 16.
//
// Thread safety: constants and pure functions.
#ifndef LLM_MODEL_SVC_FORMATS_BLOCKS_H_
#define LLM_MODEL_SVC_FORMATS_BLOCKS_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "common/half.h"

namespace llm::formats {

// Block sizes (bytes) of the ggml formats, for byte-offset arithmetic.
inline constexpr size_t kQ4_0Bytes = 18;     // d fp16 | qs[16]
inline constexpr size_t kQ4_1Bytes = 20;     // d fp16 | m fp16 | qs[16]
inline constexpr size_t kQ5_0Bytes = 22;     // d fp16 | qh u32 | qs[16]
inline constexpr size_t kQ5_1Bytes = 24;     // d fp16 | m fp16 | qh u32 | qs[16]
inline constexpr size_t kQ8_0Bytes = 34;     // d fp16 | qs[32] int8
inline constexpr size_t kQ4_KBytes = 144;    // d | dmin | scales[12] | qs[128]
inline constexpr size_t kQ6_KBytes = 210;    // ql[128] | qh[64] | scales[16] int8 | d
inline constexpr size_t kQ2_KBytes = 84;     // scales[16] (sc | mn << 4) | qs[64] | d | dmin
inline constexpr size_t kQ3_KBytes = 110;    // hmask[32] | qs[64] | scales[12] | d
inline constexpr size_t kQ5_KBytes = 176;    // d | dmin | scales[12] | qh[32] | qs[128]
inline constexpr size_t kIQ4_NLBytes = 18;   // d fp16 | qs[16] (indices into kIQ4NLValues)
inline constexpr size_t kIQ4_XSBytes = 136;  // d | scales_h u16 | scales_l[4] | qs[128]
inline constexpr int64_t kSuperBlock = 256;  // elements of a K-quant super-block
inline constexpr int64_t kSubBlock = 32;     // elements of a Q4_0..Q8_0 block or K-quant sub-block

// Unaligned little-endian loads (memcpy: no alignment or aliasing UB).
inline uint16_t LoadU16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
inline uint32_t LoadU32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// The fp16 at p (a block's d, m or dmin) as a float.
inline float Half(const uint8_t* p) { return HalfToFloat(LoadU16(p)); }

// Q4_K's 6-bit scale and min of sub-block j (0..7) from the 12 packed scale
// bytes, exactly as ggml's get_scale_min_k4.
inline void Q4KScaleMin(const uint8_t* scales, int j, int* sc, int* mn) {
  if (j < 4) {
    *sc = scales[j] & 63;
    *mn = scales[j + 4] & 63;
  } else {
    *sc = (scales[j + 4] & 0x0F) | ((scales[j - 4] >> 6) << 4);
    *mn = (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4);
  }
}

// Q3_K's 16 signed sub-block scales (6 bits, minus 32: [-32, 31]) from its
// 12 packed scale bytes, exactly as ggml's dequantize_row_q3_K unpacks them:
// scale k has low 4 bits from byte k (k < 8) or the high nibble of byte k - 8,
// and bits 4..5 from byte 8 + k % 4, bits 2 * (k / 4).
inline void Q3KScales(const uint8_t* scales, int8_t out[16]) {
  for (int k = 0; k < 16; ++k) {
    const int low = k < 8 ? scales[k] & 0x0F : scales[k - 8] >> 4;
    const int high = (scales[8 + k % 4] >> (2 * (k / 4))) & 3;
    out[k] = static_cast<int8_t>((low | (high << 4)) - 32);
  }
}

// IQ4_XS's 6-bit scale of sub-block j (0..7), minus 32: [-32, 31].
inline int IQ4XSScale(const uint8_t* block, int j) {
  const int low = (block[4 + j / 2] >> (4 * (j % 2))) & 0x0F;
  const int high = (LoadU16(block + 2) >> (2 * j)) & 3;
  return (low | (high << 4)) - 32;
}

// The 16 non-linear codes of IQ4_NL and IQ4_XS (ggml's kvalues_iq4nl).
inline constexpr int8_t kIQ4NLValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

}  // namespace llm::formats

#endif  // LLM_MODEL_SVC_FORMATS_BLOCKS_H_
