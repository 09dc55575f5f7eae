// fp16 / bf16 conversion: special values, rounding, every half against its
// definition and back.
#include "common/half.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "gtest/gtest.h"

namespace llm {
namespace {

uint16_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return static_cast<uint16_t>(u >> 16);
}

float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

TEST(HalfTest, SpecialValuesToFloat) {
  EXPECT_EQ(HalfToFloat(0x3C00), 1.0f);
  EXPECT_EQ(HalfToFloat(0xC000), -2.0f);
  EXPECT_EQ(HalfToFloat(0x7BFF), 65504.0f);
  EXPECT_EQ(HalfToFloat(0x0400), std::ldexp(1.0f, -14));     // smallest normal
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));     // smallest subnormal
  EXPECT_EQ(HalfToFloat(0x03FF), std::ldexp(1023.0f, -24));  // largest subnormal
  EXPECT_EQ(HalfToFloat(0x8001), -std::ldexp(1.0f, -24));
  EXPECT_EQ(HalfToFloat(0x7C00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(HalfToFloat(0xFC00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(HalfToFloat(0x7E00)));
  EXPECT_TRUE(std::isnan(HalfToFloat(0x7C01)));  // signalling NaN comes back quiet
  EXPECT_TRUE(std::signbit(HalfToFloat(0x8000)));
  EXPECT_EQ(HalfToFloat(0x8000), 0.0f);
}

TEST(HalfTest, FloatToHalfRoundsToNearestEven) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3C00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xC000);
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3C00);      // tie -> even
  EXPECT_EQ(FloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);  // tie -> even
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3C01);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7BFF);
  EXPECT_EQ(FloatToHalf(65519.0f), 0x7BFF);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7C00);  // tie with 65536 rounds to inf
  EXPECT_EQ(FloatToHalf(1e10f), 0x7C00);
  EXPECT_EQ(FloatToHalf(-1e10f), 0xFC00);
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::infinity()), 0x7C00);
  EXPECT_EQ(FloatToHalf(-std::numeric_limits<float>::infinity()), 0xFC00);
  const uint16_t nan = FloatToHalf(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7C00, 0x7C00);
  EXPECT_NE(nan & 0x03FF, 0);
  EXPECT_NE(FloatToHalf(FromBits(0x7F800001)) & 0x03FF, 0);  // payload lost below: still NaN
  // Subnormals.
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000);  // tie -> even (0)
  EXPECT_EQ(FloatToHalf(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(FloatToHalf(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 units: tie -> 2
  EXPECT_EQ(FloatToHalf(std::ldexp(5.0f, -25)), 0x0002);  // 2.5 units: tie -> 2
  EXPECT_EQ(FloatToHalf(std::ldexp(1023.0f, -24)), 0x03FF);
  EXPECT_EQ(FloatToHalf(std::ldexp(1023.5f, -24)), 0x0400);  // rounds up to a normal
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -30)), 0x0000);
  EXPECT_EQ(FloatToHalf(-std::ldexp(1.0f, -30)), 0x8000);
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::denorm_min()), 0x0000);
}

TEST(HalfTest, EveryHalfRoundTrips) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = HalfToFloat(static_cast<uint16_t>(h));
    if ((h & 0x7C00) == 0x7C00 && (h & 0x03FF) != 0) {
      EXPECT_TRUE(std::isnan(f)) << h;
      EXPECT_EQ(FloatToHalf(f), h | 0x0200) << h;  // quiet bit set, payload kept
    } else {
      EXPECT_EQ(FloatToHalf(f), h) << h;
    }
  }
}

// Every half against the definition: (-1)^s * 2^(e-15) * 1.m, or 2^-14 * 0.m.
TEST(HalfTest, EveryFiniteHalfMatchesItsDefinition) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const int e = (h >> 10) & 0x1F;
    const int m = h & 0x3FF;
    if (e == 31) continue;
    const float want =
        (h & 0x8000 ? -1.0f : 1.0f) * (e == 0 ? std::ldexp(static_cast<float>(m), -24)
                                              : std::ldexp(static_cast<float>(m | 0x400), e - 25));
    ASSERT_EQ(HalfToFloat(static_cast<uint16_t>(h)), want) << h;
  }
}

TEST(Bf16Test, Conversions) {
  EXPECT_EQ(Bf16ToFloat(0x3F80), 1.0f);
  EXPECT_EQ(Bf16ToFloat(0xC0A0), -5.0f);
  EXPECT_EQ(Bf16ToFloat(0x7F80), std::numeric_limits<float>::infinity());
  EXPECT_EQ(Bf16ToFloat(0xFF80), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(Bf16ToFloat(0x7FC0)));
  EXPECT_EQ(Bf16ToFloat(0x0001), std::ldexp(1.0f, -133));  // float subnormal
  EXPECT_EQ(FloatToBf16(1.0f), 0x3F80);
  EXPECT_EQ(FloatToBf16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);      // tie -> even
  EXPECT_EQ(FloatToBf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82);  // tie -> even
  EXPECT_EQ(FloatToBf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 0x3F81);
  EXPECT_EQ(FloatToBf16(std::numeric_limits<float>::max()), 0x7F80);  // overflows to inf
  EXPECT_EQ(FloatToBf16(std::numeric_limits<float>::infinity()), 0x7F80);
  EXPECT_EQ(FloatToBf16(-0.0f), 0x8000);
  EXPECT_EQ(FloatToBf16(FromBits(0x00018000)), 0x0002);  // subnormal tie -> even
  EXPECT_EQ(FloatToBf16(FromBits(0x00008000)), 0x0000);
  const uint16_t nan = FloatToBf16(FromBits(0x7F800001));  // payload only in dropped bits
  EXPECT_TRUE(std::isnan(Bf16ToFloat(nan)));
  EXPECT_EQ(Bits(Bf16ToFloat(0x1234)), 0x1234);
}

}  // namespace
}  // namespace llm
