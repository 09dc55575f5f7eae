// Tests of the CPU weight kernels. Hand-built blocks check every format's
// layout against known values; random rows check DotRow and MatMulTile of
// every kernel set (dispatched, scalar, AVX2 and AVX-512 VNNI when the CPU
// has them) against a double-precision dot over DequantizeRow and the
// dequantized q8 activations, and check batch invariance: every tile shape
// gives the same bits per (row, token), and the SIMD kernels the scalar
// kernels' bits.
#include "model_svc/kernels/quant.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/half.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model_svc/formats/weight_formats.h"
#include "model_svc/kernels/quant_internal.h"

namespace llm::kernels {
namespace {

using formats::RowBytes;

// Float types first, then the quantized ones.
constexpr TensorType kAllTypes[] = {
    TensorType::kF32,  TensorType::kF16,    TensorType::kBF16,   TensorType::kQ4_0,
    TensorType::kQ4_1, TensorType::kQ5_0,   TensorType::kQ5_1,   TensorType::kQ8_0,
    TensorType::kQ2_K, TensorType::kQ3_K,   TensorType::kQ4_K,   TensorType::kQ5_K,
    TensorType::kQ6_K, TensorType::kIQ4_NL, TensorType::kIQ4_XS,
};

// Types whose blocks are 256-element super-blocks.
bool IsSuperBlockType(TensorType type) {
  return type == TensorType::kQ2_K || type == TensorType::kQ3_K || type == TensorType::kQ4_K ||
         type == TensorType::kQ5_K || type == TensorType::kQ6_K || type == TensorType::kIQ4_XS;
}

std::string Name(TensorType type) {
  return std::string(gguf::FindTensorTypeTraits(static_cast<uint32_t>(type))->name);
}

void PutHalf(uint8_t* p, float v) {
  const uint16_t h = FloatToHalf(v);
  std::memcpy(p, &h, sizeof(h));
}

std::vector<float> Dequantize(TensorType type, const std::vector<uint8_t>& row, int64_t n) {
  std::vector<float> out(n);
  DequantizeRow(type, row.data(), out.data(), n);
  std::vector<float> scalar(n);
  internal::DequantizeRowScalar(type, row.data(), scalar.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_NEAR(out[i], scalar[i], 1e-6f * std::fabs(scalar[i])) << Name(type) << " i=" << i;
  }
  return scalar;
}

// ---------------------------------------------------------------------------
// (f) fp16 / bf16 conversion.

TEST(HalfTest, VectorConversionMatchesScalar) {
  std::vector<uint8_t> row(2 * 0x10000 + 6);  // + a 3-element tail past the 8-lane loop
  for (uint32_t h = 0; h < 0x10003; ++h) {
    const uint16_t v = static_cast<uint16_t>(h);
    std::memcpy(&row[2 * h], &v, 2);
  }
  const int64_t n = 0x10003;
  for (TensorType type : {TensorType::kF16, TensorType::kBF16}) {
    std::vector<float> fast(n), scalar(n);
    DequantizeRow(type, row.data(), fast.data(), n);
    internal::DequantizeRowScalar(type, row.data(), scalar.data(), n);
    EXPECT_EQ(std::memcmp(fast.data(), scalar.data(), n * sizeof(float)), 0) << Name(type);
  }
}

TEST(DequantizeTest, Float32AndHalves) {
  const float f32[4] = {1.5f, -2.25f, 0.0f, 3e38f};
  std::vector<uint8_t> row(sizeof(f32));
  std::memcpy(row.data(), f32, sizeof(f32));
  EXPECT_THAT(Dequantize(TensorType::kF32, row, 4),
              ::testing::ElementsAre(1.5f, -2.25f, 0.0f, 3e38f));

  const uint16_t f16[4] = {0x3C00, 0xC000, 0x3555, 0x0001};
  row.assign(sizeof(f16), 0);
  std::memcpy(row.data(), f16, sizeof(f16));
  EXPECT_THAT(Dequantize(TensorType::kF16, row, 4),
              ::testing::ElementsAre(1.0f, -2.0f, 0.333251953125f, std::ldexp(1.0f, -24)));

  const uint16_t bf16[3] = {0x3F80, 0xC0A0, 0x3EAB};
  row.assign(sizeof(bf16), 0);
  std::memcpy(row.data(), bf16, sizeof(bf16));
  EXPECT_THAT(Dequantize(TensorType::kBF16, row, 3),
              ::testing::ElementsAre(1.0f, -5.0f, 0.333984375f));
}

TEST(DequantizeTest, Q4_0) {
  std::vector<uint8_t> b(18);
  PutHalf(&b[0], 0.5f);
  for (int j = 0; j < 16; ++j) b[2 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  const std::vector<float> y = Dequantize(TensorType::kQ4_0, b, 32);
  EXPECT_EQ(y[0], -4.0f);
  EXPECT_EQ(y[8], 0.0f);
  EXPECT_EQ(y[15], 3.5f);
  EXPECT_EQ(y[16], 3.5f);
  EXPECT_EQ(y[31], -4.0f);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], (j - 8) * 0.5f);
    EXPECT_EQ(y[j + 16], (7 - j) * 0.5f);
  }
}

TEST(DequantizeTest, Q4_1) {
  // d = 0.5, m = -1, low nibbles 0..15, high nibbles 15..0.
  std::vector<uint8_t> b(20);
  PutHalf(&b[0], 0.5f);
  PutHalf(&b[2], -1.0f);
  for (int j = 0; j < 16; ++j) b[4 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  const std::vector<float> y = Dequantize(TensorType::kQ4_1, b, 32);
  const float expected[32] = {-1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 2.5f, 3.0f,  3.5f, 4.0f,
                              4.5f,  5.0f,  5.5f, 6.0f, 6.5f, 6.5f, 6.0f, 5.5f, 5.0f,  4.5f, 4.0f,
                              3.5f,  3.0f,  2.5f, 2.0f, 1.5f, 1.0f, 0.5f, 0.0f, -0.5f, -1.0f};
  for (int i = 0; i < 32; ++i) EXPECT_EQ(y[i], expected[i]) << i;
}

TEST(DequantizeTest, Q5_0) {
  // d = 0.25; qh has bits 0, 2, 16 and 31 set.
  std::vector<uint8_t> b(22);
  PutHalf(&b[0], 0.25f);
  const uint32_t qh = (1u << 0) | (1u << 2) | (1u << 16) | (1u << 31);
  std::memcpy(&b[2], &qh, 4);
  for (int j = 0; j < 16; ++j) b[6 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  const std::vector<float> y = Dequantize(TensorType::kQ5_0, b, 32);
  EXPECT_EQ(y[0], (16 + 0 - 16) * 0.25f);  // 5th bit set
  EXPECT_EQ(y[1], (1 - 16) * 0.25f);       // 5th bit clear
  EXPECT_EQ(y[2], (16 + 2 - 16) * 0.25f);
  EXPECT_EQ(y[15], (15 - 16) * 0.25f);
  EXPECT_EQ(y[16], (16 + 15 - 16) * 0.25f);  // high nibble of qs[0] is 15
  EXPECT_EQ(y[17], (14 - 16) * 0.25f);
  EXPECT_EQ(y[31], (16 + 0 - 16) * 0.25f);
  EXPECT_EQ(y[30], (1 - 16) * 0.25f);
}

TEST(DequantizeTest, Q5_1) {
  std::vector<uint8_t> b(24);
  PutHalf(&b[0], 2.0f);
  PutHalf(&b[2], -3.0f);
  const uint32_t qh = 0xF000000Fu;  // elements 0..3 and 28..31 get +16
  std::memcpy(&b[4], &qh, 4);
  for (int j = 0; j < 16; ++j) b[8 + j] = static_cast<uint8_t>(j | (j << 4));
  const std::vector<float> y = Dequantize(TensorType::kQ5_1, b, 32);
  for (int j = 0; j < 16; ++j) {
    const int q0 = j + (j < 4 ? 16 : 0);
    const int q1 = j + (j + 16 >= 28 ? 16 : 0);
    EXPECT_EQ(y[j], 2.0f * q0 - 3.0f) << j;
    EXPECT_EQ(y[j + 16], 2.0f * q1 - 3.0f) << j;
  }
  EXPECT_EQ(y[3], 35.0f);   // (3 + 16) * 2 - 3
  EXPECT_EQ(y[31], 59.0f);  // (15 + 16) * 2 - 3
}

TEST(DequantizeTest, Q8_0) {
  std::vector<uint8_t> b(34);
  PutHalf(&b[0], 0.125f);
  const int8_t q[4] = {-128, -1, 0, 127};
  for (int j = 0; j < 32; ++j) b[2 + j] = static_cast<uint8_t>(q[j % 4]);
  const std::vector<float> y = Dequantize(TensorType::kQ8_0, b, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], q[j % 4] * 0.125f);
  EXPECT_EQ(y[0], -16.0f);
  EXPECT_EQ(y[3], 15.875f);
}

// Packs 8 six-bit scales and mins like ggml's quantize_row_q4_K.
void PackQ4KScales(const int sc[8], const int mn[8], uint8_t* out) {
  for (int j = 0; j < 4; ++j) {
    out[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
    out[j + 4] = static_cast<uint8_t>(mn[j] | ((mn[j + 4] >> 4) << 6));
    out[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0x0F) | ((mn[j + 4] & 0x0F) << 4));
  }
}

TEST(DequantizeTest, Q4_K) {
  const int sc[8] = {1, 2, 3, 4, 17, 33, 50, 63};
  const int mn[8] = {0, 1, 2, 63, 20, 40, 5, 63};
  std::vector<uint8_t> b(144);
  PutHalf(&b[0], 1.0f);
  PutHalf(&b[2], 0.5f);
  PackQ4KScales(sc, mn, &b[4]);
  // The packed bytes as ggml lays them out (checked by hand for sub-blocks 4..7).
  EXPECT_EQ(b[4], 1 | (1 << 6));  // sc0 | (sc4 >> 4) << 6
  EXPECT_EQ(b[15], (63 & 15) | ((63 & 15) << 4));
  for (int l = 0; l < 128; ++l) b[16 + l] = static_cast<uint8_t>((l & 15) | (((l + 3) & 15) << 4));
  const std::vector<float> y = Dequantize(TensorType::kQ4_K, b, 256);
  EXPECT_EQ(y[0], 0.0f);                  // 1*1*0 - 0.5*0
  EXPECT_EQ(y[1], 1.0f);                  // sub-block 0, q = 1
  EXPECT_EQ(y[32], 2 * 3 - 0.5f);         // sub-block 1: high nibble of qs[0] = 3
  EXPECT_EQ(y[64 + 5], 3 * 5 - 1.0f);     // sub-block 2: low nibble of qs[37] = 5
  EXPECT_EQ(y[96 + 31], 4 * 2 - 31.5f);   // sub-block 3: high nibble of qs[63] = (63+3)&15 = 2
  EXPECT_EQ(y[128 + 2], 17 * 2 - 10.0f);  // sub-block 4: low nibble of qs[66] = 2
  EXPECT_EQ(y[224 + 0], 63 * 3 - 31.5f);  // sub-block 7: high nibble of qs[96] = 3
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      const uint8_t q = b[16 + 32 * c + l];
      EXPECT_EQ(y[64 * c + l], sc[2 * c] * (q & 15) - 0.5f * mn[2 * c]);
      EXPECT_EQ(y[64 * c + 32 + l], sc[2 * c + 1] * (q >> 4) - 0.5f * mn[2 * c + 1]);
    }
  }
}

TEST(DequantizeTest, Q6_K) {
  std::vector<uint8_t> b(210);
  const int8_t scales[16] = {1, -2, 3, -4, 5, -6, 7, -8, 127, -128, 10, 11, 12, 13, 14, 15};
  for (int l = 0; l < 128; ++l) b[l] = static_cast<uint8_t>((l & 15) | (((l * 7) & 15) << 4));
  for (int l = 0; l < 64; ++l) b[128 + l] = static_cast<uint8_t>(l * 37);
  std::memcpy(&b[192], scales, 16);
  PutHalf(&b[208], 0.5f);
  const std::vector<float> y = Dequantize(TensorType::kQ6_K, b, 256);
  // Element 0: ql[0] low = 0, qh[0] bits 0..1 = 0 -> q = -32, scale 1.
  EXPECT_EQ(y[0], 0.5f * 1 * -32);
  // Element 33: ql[33] low = 1, qh[1] = 37 = 0b00100101, bits 2..3 = 1 -> q = 17 - 32.
  EXPECT_EQ(y[33], 0.5f * 3 * (1 + 16 - 32));
  // Element 64 + 20 = 84: ql[20] high = (140 & 15) = 12, qh[20] = 740 & 255 = 228 =
  // 0b11100100, bits 4..5 = 2 -> q = 12 + 32 - 32 = 12; scale index 84/16 = 5 -> -6.
  EXPECT_EQ(y[84], 0.5f * -6 * 12);
  // Element 128 + 96 + 17 = 241: ql[64 + 32 + 17 = 113] high = (791 & 15) = 7,
  // qh[32 + 17 = 49] = 1813 & 255 = 21 = 0b00010101, bits 6..7 = 0 -> q = 7 - 32.
  EXPECT_EQ(y[241], 0.5f * 15 * (7 - 32));
  // Element 128 + 3 = 131: scale 127; ql[67] low = 3, qh[35] = 1295 & 255 = 15, bits 0..1 = 3.
  EXPECT_EQ(y[131], 0.5f * 127 * (3 + 48 - 32));
  for (int h = 0; h < 2; ++h) {
    for (int l = 0; l < 32; ++l) {
      const uint8_t* ql = &b[64 * h];
      const uint8_t qh = b[128 + 32 * h + l];
      const int q[4] = {((ql[l] & 15) | ((qh & 3) << 4)) - 32,
                        ((ql[l + 32] & 15) | (((qh >> 2) & 3) << 4)) - 32,
                        ((ql[l] >> 4) | (((qh >> 4) & 3) << 4)) - 32,
                        ((ql[l + 32] >> 4) | (((qh >> 6) & 3) << 4)) - 32};
      for (int k = 0; k < 4; ++k) {
        const int e = 128 * h + 32 * k + l;
        EXPECT_EQ(y[e], 0.5f * scales[e / 16] * q[k]) << e;
      }
    }
  }
}

// The new formats, checked against ggml's dequantize_row_* loops written out
// here a second time (element order, bit positions, scale packing).

TEST(DequantizeTest, Q5_K) {
  const int sc[8] = {1, 2, 3, 4, 17, 33, 50, 63};
  const int mn[8] = {0, 1, 2, 63, 20, 40, 5, 63};
  std::vector<uint8_t> b(176);
  PutHalf(&b[0], 1.0f);
  PutHalf(&b[2], 0.5f);
  PackQ4KScales(sc, mn, &b[4]);
  for (int l = 0; l < 32; ++l) b[16 + l] = static_cast<uint8_t>(l * 29 + 3);  // qh
  for (int l = 0; l < 128; ++l) b[48 + l] = static_cast<uint8_t>((l & 15) | (((l + 3) & 15) << 4));
  const std::vector<float> y = Dequantize(TensorType::kQ5_K, b, 256);
  // ggml: per 64 elements, scales is, is + 1; bits u1 = 1 << 2c, u2 = 2 << 2c.
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      const uint8_t q = b[48 + 32 * c + l], qh = b[16 + l];
      const int lo = (q & 15) + ((qh & (1 << (2 * c))) != 0 ? 16 : 0);
      const int hi = (q >> 4) + ((qh & (2 << (2 * c))) != 0 ? 16 : 0);
      EXPECT_EQ(y[64 * c + l], sc[2 * c] * lo - 0.5f * mn[2 * c]) << c << " " << l;
      EXPECT_EQ(y[64 * c + 32 + l], sc[2 * c + 1] * hi - 0.5f * mn[2 * c + 1]) << c << " " << l;
    }
  }
  EXPECT_EQ(y[0], 1.0f * (0 + 16) - 0.0f);  // qh[0] = 3: bit 0 set
}

TEST(DequantizeTest, Q3_K) {
  std::vector<uint8_t> b(110);
  for (int l = 0; l < 32; ++l) b[l] = static_cast<uint8_t>(l * 53 + 7);       // hmask
  for (int l = 0; l < 64; ++l) b[32 + l] = static_cast<uint8_t>(l * 97 + 1);  // qs
  // 16 scales (stored 6-bit, value - 32), packed as ggml's quantize_row_q3_K_ref does.
  int stored[16];
  for (int k = 0; k < 16; ++k) stored[k] = (k * 23 + 5) % 64;
  for (int j = 0; j < 16; ++j) {
    if (j < 8) {
      b[96 + j] = static_cast<uint8_t>(stored[j] & 0xF);
    } else {
      b[96 + j - 8] |= static_cast<uint8_t>((stored[j] & 0xF) << 4);
    }
    b[96 + 8 + j % 4] |= static_cast<uint8_t>((stored[j] >> 4) << (2 * (j / 4)));
  }
  PutHalf(&b[108], 0.25f);
  const std::vector<float> y = Dequantize(TensorType::kQ3_K, b, 256);
  int e = 0, is = 0, m = 1;
  for (int n = 0; n < 256; n += 128) {
    int shift = 0;
    const uint8_t* q = &b[32 + n / 4];
    for (int j = 0; j < 4; ++j) {
      for (int half = 0; half < 2; ++half) {
        const float dl = 0.25f * static_cast<float>(stored[is++] - 32);
        for (int l = 16 * half; l < 16 * half + 16; ++l, ++e) {
          const int v = ((q[l] >> shift) & 3) - ((b[l] & m) != 0 ? 0 : 4);
          EXPECT_EQ(y[e], dl * static_cast<float>(v)) << e;
        }
      }
      shift += 2;
      m <<= 1;
    }
  }
}

TEST(DequantizeTest, Q2_K) {
  std::vector<uint8_t> b(84);
  for (int k = 0; k < 16; ++k) b[k] = static_cast<uint8_t>(k * 37 + 11);  // sc | mn << 4
  for (int l = 0; l < 64; ++l) b[16 + l] = static_cast<uint8_t>(l * 97 + 1);
  PutHalf(&b[80], 0.5f);
  PutHalf(&b[82], 0.125f);
  const std::vector<float> y = Dequantize(TensorType::kQ2_K, b, 256);
  int e = 0, is = 0;
  for (int n = 0; n < 256; n += 128) {
    const uint8_t* q = &b[16 + n / 4];
    for (int shift = 0; shift < 8; shift += 2) {
      for (int half = 0; half < 2; ++half) {
        const uint8_t sc = b[is++];
        const float dl = 0.5f * static_cast<float>(sc & 0xF);
        const float ml = 0.125f * static_cast<float>(sc >> 4);
        for (int l = 16 * half; l < 16 * half + 16; ++l, ++e) {
          EXPECT_EQ(y[e], dl * static_cast<float>((q[l] >> shift) & 3) - ml) << e;
        }
      }
    }
  }
}

constexpr int kIQ4Table[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                               1,    13,   25,  38,  53,  69,  89,  113};

TEST(DequantizeTest, IQ4_NL) {
  std::vector<uint8_t> b(36);
  PutHalf(&b[0], 0.5f);
  PutHalf(&b[18], -2.0f);
  for (int l = 0; l < 16; ++l) {
    b[2 + l] = static_cast<uint8_t>(l | ((15 - l) << 4));
    b[20 + l] = static_cast<uint8_t>(l * 17);
  }
  const std::vector<float> y = Dequantize(TensorType::kIQ4_NL, b, 64);
  for (int l = 0; l < 16; ++l) {
    EXPECT_EQ(y[l], 0.5f * kIQ4Table[l]);
    EXPECT_EQ(y[l + 16], 0.5f * kIQ4Table[15 - l]);
    EXPECT_EQ(y[32 + l], -2.0f * kIQ4Table[l]);
    EXPECT_EQ(y[48 + l], -2.0f * kIQ4Table[l]);
  }
}

TEST(DequantizeTest, IQ4_XS) {
  std::vector<uint8_t> b(136);
  PutHalf(&b[0], 0.25f);
  const uint16_t scales_h = 0xB1E4;
  std::memcpy(&b[2], &scales_h, 2);
  const uint8_t scales_l[4] = {0x1F, 0x80, 0x3C, 0xA5};
  std::memcpy(&b[4], scales_l, 4);
  for (int l = 0; l < 128; ++l) b[8 + l] = static_cast<uint8_t>(l * 71 + 5);
  const std::vector<float> y = Dequantize(TensorType::kIQ4_XS, b, 256);
  for (int ib = 0; ib < 8; ++ib) {
    const int ls = ((scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) | (((scales_h >> 2 * ib) & 3) << 4);
    const float dl = 0.25f * static_cast<float>(ls - 32);
    for (int j = 0; j < 16; ++j) {
      const uint8_t q = b[8 + 16 * ib + j];
      EXPECT_EQ(y[32 * ib + j], dl * kIQ4Table[q & 0xf]) << ib << " " << j;
      EXPECT_EQ(y[32 * ib + j + 16], dl * kIQ4Table[q >> 4]) << ib << " " << j;
    }
  }
}

// ---------------------------------------------------------------------------
// Random data.

// Random rows of `type`: random quant bytes with sane fp16 scales.
std::vector<uint8_t> RandomRows(TensorType type, int64_t rows, int64_t n, std::mt19937& rng) {
  const size_t row_bytes = RowBytes(type, n);
  std::vector<uint8_t> data(rows * row_bytes);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> val(-1.0f, 1.0f);
  std::uniform_real_distribution<float> scale(0.001f, 0.05f);
  for (auto& v : data) v = static_cast<uint8_t>(byte(rng));
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* row = data.data() + r * row_bytes;
    switch (type) {
      case TensorType::kF32:
        for (int64_t i = 0; i < n; ++i) {
          const float f = val(rng);
          std::memcpy(row + 4 * i, &f, 4);
        }
        break;
      case TensorType::kF16:
        for (int64_t i = 0; i < n; ++i) PutHalf(row + 2 * i, val(rng));
        break;
      case TensorType::kBF16:
        for (int64_t i = 0; i < n; ++i) {
          const uint16_t h = FloatToBf16(val(rng));
          std::memcpy(row + 2 * i, &h, 2);
        }
        break;
      case TensorType::kQ4_0:
      case TensorType::kQ5_0:
      case TensorType::kQ8_0:
      case TensorType::kIQ4_NL: {
        const size_t bytes = RowBytes(type, 32);
        for (int64_t b = 0; b < n / 32; ++b) PutHalf(row + b * bytes, scale(rng));
        break;
      }
      case TensorType::kQ4_1:
      case TensorType::kQ5_1: {
        const size_t bytes = RowBytes(type, 32);
        for (int64_t b = 0; b < n / 32; ++b) {
          PutHalf(row + b * bytes, scale(rng));
          PutHalf(row + b * bytes + 2, -10 * scale(rng));
        }
        break;
      }
      case TensorType::kQ4_K:
        for (int64_t b = 0; b < n / 256; ++b) {
          PutHalf(row + b * 144, scale(rng));
          PutHalf(row + b * 144 + 2, scale(rng));
        }
        break;
      case TensorType::kQ6_K:
        for (int64_t b = 0; b < n / 256; ++b) PutHalf(row + b * 210 + 208, scale(rng) * 0.1f);
        break;
      case TensorType::kQ5_K:
        for (int64_t b = 0; b < n / 256; ++b) {
          PutHalf(row + b * 176, scale(rng));
          PutHalf(row + b * 176 + 2, scale(rng));
        }
        break;
      case TensorType::kQ3_K:
        for (int64_t b = 0; b < n / 256; ++b) PutHalf(row + b * 110 + 108, scale(rng) * 0.1f);
        break;
      case TensorType::kQ2_K:
        for (int64_t b = 0; b < n / 256; ++b) {
          PutHalf(row + b * 84 + 80, scale(rng));
          PutHalf(row + b * 84 + 82, scale(rng));
        }
        break;
      case TensorType::kIQ4_XS:
        for (int64_t b = 0; b < n / 256; ++b) PutHalf(row + b * 136, scale(rng) * 0.01f);
        break;
      default:
        ADD_FAILURE() << "unexpected type";
    }
  }
  return data;
}

// The activations of one token: fp32, q8 blocks, and the q8 blocks dequantized
// (the values a quantized weight is really multiplied with).
struct Token {
  std::vector<float> f32;
  std::vector<BlockQ8> q8;
  std::vector<double> q8_values;
  ActRow act() const { return {f32.data(), q8.data()}; }
};

Token RandomToken(int64_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> val(-2.0f, 2.0f);
  Token t;
  t.f32.resize(n);
  for (float& v : t.f32) v = val(rng);
  t.q8.resize(n / 32);
  QuantizeQ8(t.f32.data(), t.q8.data(), n);
  for (const BlockQ8& b : t.q8) {
    for (int l = 0; l < 32; ++l) t.q8_values.push_back(static_cast<double>(b.d) * b.q[l]);
  }
  return t;
}

bool IsFloatType(TensorType type) {
  return type == TensorType::kF32 || type == TensorType::kF16 || type == TensorType::kBF16;
}

// Exact dot over the dequantized row, and the sum of |products| (error scale).
struct Reference {
  double dot = 0;
  double abs = 0;
};

Reference ReferenceDot(TensorType type, const uint8_t* row, const Token& x, int64_t n) {
  std::vector<float> w(n);
  internal::DequantizeRowScalar(type, row, w.data(), n);
  Reference ref;
  for (int64_t i = 0; i < n; ++i) {
    const double xi = IsFloatType(type) ? x.f32[i] : x.q8_values[i];
    ref.dot += static_cast<double>(w[i]) * xi;
    ref.abs += std::fabs(static_cast<double>(w[i]) * xi);
  }
  return ref;
}

constexpr double kRelTol = 1e-5;

using TileFn = void (*)(TensorType, const uint8_t*, size_t, int64_t, int64_t, int64_t,
                        const ActRow*, int64_t, float*, int64_t);

struct KernelSet {
  const char* name;
  float (*dot)(TensorType, const void*, const ActRow&, int64_t);
  TileFn tile;
};

std::vector<KernelSet> KernelSets() {
  std::vector<KernelSet> sets = {{"dispatch", DotRow, MatMulTile},
                                 {"scalar", internal::DotRowScalar, internal::MatMulTileScalar}};
  if (internal::CpuHasAvx2Fma()) {
    sets.push_back({"avx2", internal::DotRowAvx2, internal::MatMulTileAvx2});
  }
  if (internal::CpuHasAvx512Vnni()) {
    sets.push_back({"avx512vnni", internal::DotRowAvx512Vnni, internal::MatMulTileAvx512Vnni});
  }
  if (internal::CpuHasAmxInt8()) {
    sets.push_back({"amx", internal::DotRowAvx512Vnni, internal::MatMulTileAmx});
  }
  return sets;
}

std::vector<int64_t> RowLengths(TensorType type) {
  if (IsSuperBlockType(type)) return {256, 1536};
  return {32, 256, 576, 1536};
}

class KernelTest : public ::testing::TestWithParam<TensorType> {};

// (b) DotRow against the double-precision reference.
TEST_P(KernelTest, DotRowMatchesReference) {
  const TensorType type = GetParam();
  std::mt19937 rng(1234 + static_cast<int>(type));
  for (int64_t n : RowLengths(type)) {
    const int64_t rows = 5;
    const std::vector<uint8_t> w = RandomRows(type, rows, n, rng);
    const size_t row_bytes = RowBytes(type, n);
    for (int trial = 0; trial < 3; ++trial) {
      const Token x = RandomToken(n, rng);
      for (int64_t r = 0; r < rows; ++r) {
        const uint8_t* row = w.data() + r * row_bytes;
        const Reference ref = ReferenceDot(type, row, x, n);
        for (const KernelSet& k : KernelSets()) {
          const float got = k.dot(type, row, x.act(), n);
          EXPECT_NEAR(got, ref.dot, kRelTol * ref.abs) << k.name << " n=" << n << " r=" << r;
        }
      }
    }
  }
}

// (b) MatMulTile for 1..9 tokens (every tile remainder), a row range that
// does not start at 0, and an output stride wider than the rows.
TEST_P(KernelTest, MatMulTileMatchesReference) {
  const TensorType type = GetParam();
  std::mt19937 rng(99 + static_cast<int>(type));
  for (int64_t n : RowLengths(type)) {
    const int64_t rows = 11, r0 = 2, r1 = 11, stride = 14;
    const std::vector<uint8_t> w = RandomRows(type, rows, n, rng);
    const size_t row_bytes = RowBytes(type, n);
    std::vector<Token> tokens;
    for (int t = 0; t < 9; ++t) tokens.push_back(RandomToken(n, rng));
    std::vector<ActRow> acts;
    for (const Token& t : tokens) acts.push_back(t.act());
    std::vector<std::vector<Reference>> refs(rows, std::vector<Reference>(tokens.size()));
    for (int64_t r = r0; r < r1; ++r) {
      for (size_t t = 0; t < tokens.size(); ++t) {
        refs[r][t] = ReferenceDot(type, w.data() + r * row_bytes, tokens[t], n);
      }
    }
    for (const KernelSet& k : KernelSets()) {
      for (int64_t nt = 1; nt <= 9; ++nt) {
        constexpr float kSentinel = -12345.0f;
        std::vector<float> out(nt * stride, kSentinel);
        k.tile(type, w.data(), row_bytes, n, r0, r1, acts.data(), nt, out.data(), stride);
        for (int64_t t = 0; t < nt; ++t) {
          for (int64_t r = 0; r < stride; ++r) {
            const float got = out[t * stride + r];
            if (r < r0 || r >= r1) {
              EXPECT_EQ(got, kSentinel) << k.name << " wrote outside the tile";
              continue;
            }
            EXPECT_NEAR(got, refs[r][t].dot, kRelTol * refs[r][t].abs)
                << k.name << " n=" << n << " tokens=" << nt << " r=" << r << " t=" << t;
          }
        }
      }
    }
  }
}

// Bit patterns, so that a mismatch prints exactly (and -0 != +0).
std::vector<uint32_t> BitsOf(const std::vector<float>& v) {
  std::vector<uint32_t> bits(v.size());
  std::memcpy(bits.data(), v.data(), v.size() * sizeof(float));
  return bits;
}

// (g) Batch invariance: MatMulTile over 1..24 tokens (AVX-512: groups of 16
// and a FourTokenTile of 2-8 tokens, or a single token) and row ranges that are not
// multiples of any tile, with varying other tokens in the call, gives for
// every (row, token) the bits of a call with that one row and token alone;
// DotRow gives them too, and the SIMD kernels give the scalar kernels' bits.
TEST_P(KernelTest, TilesAreBatchInvariant) {
  const TensorType type = GetParam();
  std::mt19937 rng(31 + static_cast<int>(type));
  constexpr int64_t kRows = 37, kTokens = 27, kMaxCall = 24;
  for (int64_t n : RowLengths(type)) {
    SCOPED_TRACE(::testing::Message() << "n=" << n);
    const std::vector<uint8_t> w = RandomRows(type, kRows, n, rng);
    const size_t row_bytes = RowBytes(type, n);
    std::vector<Token> tokens;
    for (int t = 0; t < kTokens; ++t) tokens.push_back(RandomToken(n, rng));
    std::vector<ActRow> acts;
    for (const Token& t : tokens) acts.push_back(t.act());
    std::vector<std::vector<float>> alone_by_set;
    for (const KernelSet& k : KernelSets()) {
      SCOPED_TRACE(k.name);
      // One row and one token per call: out[t * kRows + r].
      std::vector<float> alone(kTokens * kRows);
      for (int64_t t = 0; t < kTokens; ++t) {
        for (int64_t r = 0; r < kRows; ++r) {
          k.tile(type, w.data(), row_bytes, n, r, r + 1, &acts[t], 1, &alone[t * kRows], kRows);
          const float dot = k.dot(type, w.data() + r * row_bytes, acts[t], n);
          ASSERT_EQ(BitsOf({dot}), BitsOf({alone[t * kRows + r]})) << "DotRow r=" << r;
        }
      }
      const std::pair<int64_t, int64_t> ranges[] = {{0, kRows}, {3, 30}, {1, 12}, {5, 6}, {13, 37}};
      for (int64_t nt = 1; nt <= kMaxCall; ++nt) {
        for (int64_t first : {int64_t{0}, kTokens - nt}) {  // different other tokens
          for (const auto& [r0, r1] : ranges) {
            std::vector<float> out(nt * kRows, 0.0f);
            k.tile(type, w.data(), row_bytes, n, r0, r1, &acts[first], nt, out.data(), kRows);
            for (int64_t t = 0; t < nt; ++t) {
              const std::vector<float> got(out.begin() + t * kRows + r0,
                                           out.begin() + t * kRows + r1);
              const std::vector<float> want(alone.begin() + (first + t) * kRows + r0,
                                            alone.begin() + (first + t) * kRows + r1);
              ASSERT_EQ(BitsOf(got), BitsOf(want)) << "tokens=" << nt << " first=" << first
                                                   << " rows [" << r0 << ", " << r1 << ") t=" << t;
            }
          }
        }
      }
      alone_by_set.push_back(std::move(alone));
    }
    // Every kernel set (scalar, AVX2, AVX-512 VNNI, dispatch) gives the same bits.
    for (size_t i = 1; i < alone_by_set.size(); ++i) {
      EXPECT_EQ(BitsOf(alone_by_set[i]), BitsOf(alone_by_set[0]))
          << KernelSets()[i].name << " vs " << KernelSets()[0].name;
    }
  }
}

// (c) The SIMD kernels against the scalar reference, bit for bit, on a matrix
// large enough for several row chunks and more tokens than one pointer batch.
void ExpectMatchesScalarOnLargeTiles(TensorType type, TileFn tile,
                                     const std::vector<int64_t>& counts) {
  std::mt19937 rng(7 + static_cast<int>(type));
  const int64_t n = 512;
  const size_t row_bytes = RowBytes(type, n);
  // ~2.5 chunks of 128 KiB of weights.
  const int64_t rows = std::max<int64_t>(9, (320 * 1024) / static_cast<int64_t>(row_bytes));
  const std::vector<uint8_t> w = RandomRows(type, rows, n, rng);
  for (int64_t nt : counts) {
    std::vector<Token> tokens;
    for (int64_t t = 0; t < nt; ++t) tokens.push_back(RandomToken(n, rng));
    std::vector<ActRow> acts;
    for (const Token& t : tokens) acts.push_back(t.act());
    const int64_t r_end = nt > 100 ? 9 : rows;  // keep the scalar run short
    std::vector<float> fast(nt * rows), slow(nt * rows);
    tile(type, w.data(), row_bytes, n, 0, r_end, acts.data(), nt, fast.data(), rows);
    internal::MatMulTileScalar(type, w.data(), row_bytes, n, 0, r_end, acts.data(), nt, slow.data(),
                               rows);
    for (int64_t t = 0; t < nt; ++t) {
      const std::vector<float> got(fast.begin() + t * rows, fast.begin() + t * rows + r_end);
      const std::vector<float> want(slow.begin() + t * rows, slow.begin() + t * rows + r_end);
      ASSERT_EQ(BitsOf(got), BitsOf(want)) << "tokens=" << nt << " t=" << t;
    }
  }
}

TEST_P(KernelTest, Avx2MatchesScalarOnLargeTiles) {
  if (!internal::CpuHasAvx2Fma()) GTEST_SKIP() << "no AVX2+FMA on this CPU";
  ExpectMatchesScalarOnLargeTiles(GetParam(), internal::MatMulTileAvx2, {6, 261});
}

TEST_P(KernelTest, Avx512VnniMatchesScalarOnLargeTiles) {
  if (!internal::CpuHasAvx512Vnni()) GTEST_SKIP() << "no AVX-512 VNNI on this CPU";
  // 16 + 16 + 6 (groups of 16 and one of 8); 16 + 16 + 13 (a padded 16);
  // 16 + 2 (a 2-token tail); 261 (more than one pointer batch).
  ExpectMatchesScalarOnLargeTiles(GetParam(), internal::MatMulTileAvx512Vnni, {38, 45, 18, 261});
}

// The AMX tiles against the scalar reference, bit for bit: 37 rows (two
// whole 16-row tiles and 5 left to the VNNI kernels) from row 3, 128 tokens
// (8 token tiles, the least AMX takes) and 141 (13 left over), every row
// length; and 127 tokens, which all go to the VNNI kernels.
TEST_P(KernelTest, AmxMatchesScalar) {
  if (!internal::CpuHasAmxInt8()) {
    GTEST_SKIP() << "no AMX int8 on this CPU (or Linux did not grant the tile state)";
  }
  const TensorType type = GetParam();
  std::mt19937 rng(11 + static_cast<int>(type));
  constexpr int64_t kRows = 40, kR0 = 3;
  for (int64_t n : RowLengths(type)) {
    SCOPED_TRACE(::testing::Message() << "n=" << n);
    const size_t row_bytes = RowBytes(type, n);
    const std::vector<uint8_t> w = RandomRows(type, kRows, n, rng);
    for (int64_t nt : {128, 141, 127}) {
      std::vector<Token> tokens;
      for (int64_t t = 0; t < nt; ++t) tokens.push_back(RandomToken(n, rng));
      std::vector<ActRow> acts;
      for (const Token& t : tokens) acts.push_back(t.act());
      std::vector<float> fast(nt * kRows, 0.0f), slow(nt * kRows, 0.0f);
      internal::MatMulTileAmx(type, w.data(), row_bytes, n, kR0, kRows, acts.data(), nt,
                              fast.data(), kRows);
      internal::MatMulTileScalar(type, w.data(), row_bytes, n, kR0, kRows, acts.data(), nt,
                                 slow.data(), kRows);
      ASSERT_EQ(BitsOf(fast), BitsOf(slow)) << "tokens=" << nt;
    }
  }
}

// (c) In a SameActivationsScope, MatMulTile over pieces of the rows gives one
// call's bits; a call with other activations in the same scope gets its
// own; and a new scope lays the tokens out again even at the same address
// (the CPU backend reuses one ActRow array for every product). For 2, 6 and
// 19 tokens (the AVX-512 kernels' layouts for FourTokenTile's one and two
// groups of 4, and a group of 16 beside one).
TEST_P(KernelTest, SameActivationsScopeReusesOnlyTheSameTokens) {
  const TensorType type = GetParam();
  std::mt19937 rng(29 + static_cast<int>(type));
  constexpr int64_t kRows = 37;
  const int64_t n = RowLengths(type).back();
  // Two tokens (a decode of two sessions), two groups of 4, and a group of
  // 16 with a 3-token group.
  for (const int64_t num_tokens : {2, 6, 19}) {
    SCOPED_TRACE(::testing::Message() << "tokens=" << num_tokens);
    const std::vector<uint8_t> w = RandomRows(type, kRows, n, rng);
    const size_t row_bytes = RowBytes(type, n);
    auto make_tokens = [&] {
      std::vector<Token> tokens;
      for (int64_t t = 0; t < num_tokens; ++t) tokens.push_back(RandomToken(n, rng));
      return tokens;
    };
    std::vector<Token> a = make_tokens(), b = make_tokens(), c = make_tokens();
    std::vector<ActRow> acts_a, acts_b;
    for (int64_t t = 0; t < num_tokens; ++t) {
      acts_a.push_back(a[t].act());
      acts_b.push_back(b[t].act());
    }
    auto whole = [&](const std::vector<ActRow>& acts) {
      std::vector<float> out(num_tokens * kRows);
      MatMulTile(type, w.data(), row_bytes, n, 0, kRows, acts.data(), num_tokens, out.data(),
                 kRows);
      return out;
    };
    auto pieces = [&](const std::vector<ActRow>& acts) {
      std::vector<float> out(num_tokens * kRows);
      for (const auto& [r0, r1] : {std::pair<int64_t, int64_t>{0, 8}, {8, 21}, {21, kRows}}) {
        MatMulTile(type, w.data(), row_bytes, n, r0, r1, acts.data(), num_tokens, out.data(),
                   kRows);
      }
      return out;
    };
    std::vector<ActRow> acts_c;
    for (const Token& t : c) acts_c.push_back(t.act());
    const std::vector<float> want_a = whole(acts_a), want_b = whole(acts_b), want_c = whole(acts_c);
    {
      const SameActivationsScope same;
      EXPECT_EQ(BitsOf(pieces(acts_a)), BitsOf(want_a));
      EXPECT_EQ(BitsOf(pieces(acts_b)), BitsOf(want_b));
      EXPECT_EQ(BitsOf(pieces(acts_a)), BitsOf(want_a));
    }
    // Other activations at a's address (nothing in between): a new scope sees
    // them.
    for (int64_t t = 0; t < num_tokens; ++t) {  // same sizes: no reallocation
      a[t].f32 = c[t].f32;
      a[t].q8 = c[t].q8;
    }
    {
      const SameActivationsScope same;
      EXPECT_EQ(BitsOf(pieces(acts_a)), BitsOf(want_c));
    }
  }
}

// (c) The AVX-512 VNNI kernels against the scalar ones, bit for bit, for
// 1..17 tokens and more (every split into groups of 16, a FourTokenTile of
// 2-8 tokens (one or two groups of 4) and a one-token tail), row ranges that
// are not multiples of any tile (FourTokenTile's last group of 1-3 rows),
// and an output stride
// wider than the rows, whose other entries must stay untouched.
TEST_P(KernelTest, Avx512VnniMatchesScalar) {
  if (!internal::CpuHasAvx512Vnni()) GTEST_SKIP() << "no AVX-512 VNNI on this CPU";
  const TensorType type = GetParam();
  std::mt19937 rng(17 + static_cast<int>(type));
  constexpr int64_t kRows = 37, kStride = 41;
  for (int64_t n : RowLengths(type)) {
    SCOPED_TRACE(::testing::Message() << "n=" << n);
    const std::vector<uint8_t> w = RandomRows(type, kRows, n, rng);
    const size_t row_bytes = RowBytes(type, n);
    std::vector<Token> tokens;
    for (int t = 0; t < 35; ++t) tokens.push_back(RandomToken(n, rng));
    std::vector<ActRow> acts;
    for (const Token& t : tokens) acts.push_back(t.act());
    const std::pair<int64_t, int64_t> ranges[] = {{0, kRows}, {3, 30}, {1, 12}, {5, 6}, {13, 37}};
    std::vector<int64_t> counts;
    for (int64_t nt = 1; nt <= 17; ++nt) counts.push_back(nt);
    for (int64_t nt : {18, 19, 20, 24, 25, 32, 33, 34, 35}) counts.push_back(nt);
    for (int64_t nt : counts) {
      for (const auto& [r0, r1] : ranges) {
        constexpr float kSentinel = -12345.0f;
        std::vector<float> fast(nt * kStride, kSentinel), slow(nt * kStride, kSentinel);
        internal::MatMulTileAvx512Vnni(type, w.data(), row_bytes, n, r0, r1, acts.data(), nt,
                                       fast.data(), kStride);
        internal::MatMulTileScalar(type, w.data(), row_bytes, n, r0, r1, acts.data(), nt,
                                   slow.data(), kStride);
        ASSERT_EQ(BitsOf(fast), BitsOf(slow))
            << "tokens=" << nt << " rows [" << r0 << ", " << r1 << ")";
      }
    }
  }
}

TEST_P(KernelTest, DequantizeAvx2MatchesScalar) {
  if (!internal::CpuHasAvx2Fma()) GTEST_SKIP() << "no AVX2+FMA on this CPU";
  const TensorType type = GetParam();
  std::mt19937 rng(5 + static_cast<int>(type));
  const int64_t n = 1536;
  const std::vector<uint8_t> w = RandomRows(type, 1, n, rng);
  std::vector<float> fast(n), slow(n);
  internal::DequantizeRowAvx2(type, w.data(), fast.data(), n);
  internal::DequantizeRowScalar(type, w.data(), slow.data(), n);
  const bool has_min = type == TensorType::kQ4_1 || type == TensorType::kQ5_1 ||
                       type == TensorType::kQ4_K || type == TensorType::kQ5_K;
  float max_abs = 0;
  for (float v : slow) max_abs = std::max(max_abs, std::fabs(v));
  for (int64_t i = 0; i < n; ++i) {
    if (has_min) {
      // d * q + m is one fused rounding in AVX2, two in the scalar code.
      EXPECT_NEAR(fast[i], slow[i], 1e-6f * max_abs) << i;
    } else {
      EXPECT_EQ(fast[i], slow[i]) << i;
    }
  }
}

// Codes of the largest magnitude with activations of +-127 everywhere: the
// worst case for the int16 sums of the SIMD kernels (no saturation allowed).
class QuantKernelTest : public ::testing::TestWithParam<TensorType> {};

TEST_P(QuantKernelTest, ExtremeCodesDoNotOverflow) {
  const TensorType type = GetParam();
  const int64_t n = 512;
  const size_t row_bytes = RowBytes(type, n);
  const size_t block_bytes = RowBytes(type, IsSuperBlockType(type) ? 256 : 32);
  // Even rows: all code bytes 0x00, odd rows: all 0xFF (Q8_0: -128 and 127);
  // 16 rows fill every row tile of the kernels.
  constexpr int kRows = 16;
  std::vector<uint8_t> w(kRows * row_bytes);
  for (int row = 0; row < kRows; ++row) {
    const bool even = row % 2 == 0;
    uint8_t fill = even ? 0x00 : 0xFF;
    if (type == TensorType::kQ8_0) fill = even ? 0x80 : 0x7F;
    uint8_t* p = w.data() + row * row_bytes;
    std::memset(p, fill, row_bytes);
    for (size_t off = 0; off < row_bytes; off += block_bytes) {
      switch (type) {
        case TensorType::kQ4_1:
        case TensorType::kQ5_1:
          PutHalf(p + off, 1.0f / 64);
          PutHalf(p + off + 2, -1.0f / 8);
          break;
        case TensorType::kQ4_K:
        case TensorType::kQ5_K:
          PutHalf(p + off, 1.0f / 64);
          PutHalf(p + off + 2, 1.0f / 256);
          std::memset(p + off + 4, 0xFF, 12);  // sc = mn = 63
          break;
        case TensorType::kQ3_K:  // codes -4 (even rows) or 3, scales -32 or 31
          PutHalf(p + off + 108, 1.0f / 64);
          break;
        case TensorType::kQ2_K:            // codes 0 or 3
          std::memset(p + off, 0xFF, 16);  // sc = mn = 15
          PutHalf(p + off + 80, 1.0f / 64);
          PutHalf(p + off + 82, 1.0f / 256);
          break;
        case TensorType::kQ6_K:
          std::memset(p + off + 192, even ? 0x80 : 0x7F, 16);  // scales -128 / 127
          PutHalf(p + off + 208, 1.0f / 64);
          break;
        default:
          PutHalf(p + off, 1.0f / 64);
          break;
      }
    }
  }
  // Tokens: all +1, all -1, alternating (q = +-127).
  std::vector<Token> tokens;
  for (int t = 0; t < 20; ++t) {
    Token x;
    x.f32.resize(n);
    for (int64_t i = 0; i < n; ++i) {
      x.f32[i] = t % 3 == 0 ? 1.0f : t % 3 == 1 ? -1.0f : (i % 2 == 0 ? 1.0f : -1.0f);
    }
    x.q8.resize(n / 32);
    QuantizeQ8(x.f32.data(), x.q8.data(), n);
    for (const BlockQ8& b : x.q8) {
      for (int l = 0; l < 32; ++l) x.q8_values.push_back(static_cast<double>(b.d) * b.q[l]);
    }
    tokens.push_back(std::move(x));
  }
  std::vector<ActRow> acts;
  for (const Token& t : tokens) acts.push_back(t.act());
  for (const KernelSet& k : KernelSets()) {
    for (int nt : {1, 2, 5, 9, 20}) {  // every tile kernel (AVX-512: groups of 16 and 8)
      std::vector<float> out(nt * kRows);
      k.tile(type, w.data(), row_bytes, n, 0, kRows, acts.data(), nt, out.data(), kRows);
      for (int t = 0; t < nt; ++t) {
        for (int r = 0; r < kRows; ++r) {
          const Reference ref = ReferenceDot(type, w.data() + r * row_bytes, tokens[t], n);
          EXPECT_NEAR(out[t * kRows + r], ref.dot, kRelTol * ref.abs)
              << k.name << " tokens " << nt << " row " << r << " token " << t;
          EXPECT_NEAR(k.dot(type, w.data() + r * row_bytes, tokens[t].act(), n), ref.dot,
                      kRelTol * ref.abs)
              << k.name << " row " << r << " token " << t;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, KernelTest, ::testing::ValuesIn(kAllTypes),
                         [](const ::testing::TestParamInfo<TensorType>& info) {
                           return Name(info.param);
                         });
INSTANTIATE_TEST_SUITE_P(QuantTypes, QuantKernelTest,
                         ::testing::ValuesIn(std::begin(kAllTypes) + 3, std::end(kAllTypes)),
                         [](const ::testing::TestParamInfo<TensorType>& info) {
                           return Name(info.param);
                         });

// ---------------------------------------------------------------------------
// (d) QuantizeQ8.

TEST(QuantizeQ8Test, RoundTripErrorBound) {
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> val(-3.0f, 3.0f);
  const int64_t n = 32 * 40;
  std::vector<float> x(n);
  for (float& v : x) v = val(rng);
  // Special blocks: all zero, one huge value, tiny values, exact halves.
  for (int l = 0; l < 32; ++l) x[l] = 0.0f;
  x[32 + 5] = 1e30f;
  for (int l = 64; l < 96; ++l) x[l] = 1e-30f * (l - 80);
  for (int l = 96; l < 128; ++l) x[l] = (l - 112) * 0.5f;
  std::vector<BlockQ8> q(n / 32);
  QuantizeQ8(x.data(), q.data(), n);
  for (int64_t b = 0; b < n / 32; ++b) {
    float amax = 0;
    int sum = 0;
    for (int l = 0; l < 32; ++l) amax = std::max(amax, std::fabs(x[32 * b + l]));
    EXPECT_EQ(q[b].d, amax / 127.0f) << b;
    for (int l = 0; l < 32; ++l) {
      const float xi = x[32 * b + l];
      EXPECT_GE(q[b].q[l], -127);
      // Half a step, plus the rounding of x * (1 / d) before it is rounded to an integer.
      const double err = std::fabs(static_cast<double>(q[b].d) * q[b].q[l] - xi);
      EXPECT_LE(err, (0.5 + 1e-4) * q[b].d) << "b=" << b << " l=" << l;
      sum += q[b].q[l];
    }
    EXPECT_EQ(q[b].s, q[b].d * static_cast<float>(sum)) << b;
  }
  for (int l = 0; l < 32; ++l) EXPECT_EQ(q[0].q[l], 0);
  EXPECT_EQ(q[0].d, 0.0f);
  EXPECT_EQ(q[1].q[5], 127);
  // Exact halves: x = k * 0.5 with amax 8 -> q = k * 0.5 * 127 / 8, checked by the bound above.
}

// QuantizeQ8 kernel `fast` gives exactly QuantizeQ8Scalar's blocks.
void ExpectQuantizeMatchesScalar(void (*fast)(const float*, BlockQ8*, int64_t)) {
  std::mt19937 rng(43);
  std::uniform_real_distribution<float> val(-100.0f, 100.0f);
  const int64_t n = 32 * 200;
  std::vector<float> x(n);
  for (float& v : x) v = val(rng);
  // Block 0 has d = 1 and many exact .5 ties (rounded half to even).
  for (int l = 0; l < 31; ++l) x[l] = static_cast<float>(l - 15) + 0.5f;
  x[31] = 127.0f;
  // A block of tiny values, and one with an infinity (d and s infinite, the
  // infinity's code -127, the others 0).
  for (int l = 0; l < 32; ++l) x[5 * 32 + l] = 1e-38f * static_cast<float>(l - 16);
  x[6 * 32 + 7] = -std::numeric_limits<float>::infinity();
  std::vector<BlockQ8> f(n / 32), slow(n / 32);
  fast(x.data(), f.data(), n);
  internal::QuantizeQ8Scalar(x.data(), slow.data(), n);
  EXPECT_EQ(std::memcmp(f.data(), slow.data(), f.size() * sizeof(BlockQ8)), 0);
  EXPECT_EQ(slow[0].d, 1.0f);
  EXPECT_EQ(slow[0].q[0], -14);  // -14.5 -> -14
  EXPECT_EQ(slow[0].q[1], -14);  // -13.5 -> -14
  EXPECT_EQ(slow[0].q[15], 0);   // 0.5 -> 0
  EXPECT_EQ(slow[0].q[16], 2);   // 1.5 -> 2
  // Block counts that are not multiples of the kernels' 8 or 16, and an
  // all-zero block (d = 0).
  std::fill(x.begin() + 3 * 32, x.begin() + 4 * 32, 0.0f);
  for (const int64_t blocks : {1, 5, 8, 13, 16, 17, 77}) {
    std::vector<BlockQ8> fb(blocks), sb(blocks);
    fast(x.data(), fb.data(), blocks * 32);
    internal::QuantizeQ8Scalar(x.data(), sb.data(), blocks * 32);
    EXPECT_EQ(std::memcmp(fb.data(), sb.data(), fb.size() * sizeof(BlockQ8)), 0) << blocks;
  }
}

TEST(QuantizeQ8Test, Avx2MatchesScalarExactly) {
  if (!internal::CpuHasAvx2Fma()) GTEST_SKIP() << "no AVX2+FMA on this CPU";
  ExpectQuantizeMatchesScalar(internal::QuantizeQ8Avx2);
}

TEST(QuantizeQ8Test, Avx512MatchesScalarExactly) {
  if (!internal::CpuHasAvx512Vnni()) GTEST_SKIP() << "no AVX-512 VNNI on this CPU";
  ExpectQuantizeMatchesScalar(internal::QuantizeQ8Avx512);
}

TEST(KernelIsaTest, MatchesCpu) {
  const char* no_amx = std::getenv("LLM_NO_AMX");
  const bool amx = internal::CpuHasAmxInt8() && (no_amx == nullptr || std::string(no_amx) != "1");
  EXPECT_EQ(KernelIsa(), amx                            ? "avx512vnni+amx"
                         : internal::CpuHasAvx512Vnni() ? "avx512vnni"
                         : internal::CpuHasAvx2Fma()    ? "avx2"
                                                        : "scalar");
}

}  // namespace
}  // namespace llm::kernels
