#include "common/half.h"

#include <cmath>
#include <cstring>

namespace llm {

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1F;
  const uint32_t mant = h & 0x3FF;
  uint32_t bits;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24, exact in float.
    const float mag = std::ldexp(static_cast<float>(mant), -24);
    uint32_t mag_bits;
    std::memcpy(&mag_bits, &mag, sizeof(mag_bits));
    bits = sign | mag_bits;
  } else if (exp == 31) {
    // inf, or NaN with its payload, made quiet as F16C's vcvtph2ps does.
    bits = sign | 0x7F800000u | (mant << 13) | (mant != 0 ? 0x400000u : 0u);
  } else {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof(x));
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  x &= 0x7FFFFFFFu;
  if (x >= 0x7F800000u) {  // inf or NaN; NaN stays NaN (quiet bit set)
    const uint32_t nan = x > 0x7F800000u ? 0x200u | ((x >> 13) & 0x3FFu) : 0u;
    return static_cast<uint16_t>(sign | 0x7C00u | nan);
  }
  if (x >= 0x477FF000u) return sign | 0x7C00u;  // >= 65520 rounds to inf
  if (x >= 0x38800000u) {                       // normal half (>= 2^-14)
    // Round to nearest even on the 13 dropped bits; a carry bumps the exponent.
    const uint32_t rounded = x + 0xFFFu + ((x >> 13) & 1u);
    return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
  }
  const uint32_t exp = x >> 23;
  if (exp < 102) return sign;  // < 2^-25: rounds to (signed) zero
  // Subnormal half: value / 2^-24 = mant24 >> (126 - exp), rounded to even.
  const uint32_t mant = (x & 0x7FFFFFu) | 0x800000u;
  const uint32_t shift = 126 - exp;  // 14..24
  uint32_t h = mant >> shift;
  const uint32_t rem = mant & ((1u << shift) - 1);
  const uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (h & 1u))) ++h;  // may carry into the smallest normal
  return static_cast<uint16_t>(sign | h);
}

float Bf16ToFloat(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

uint16_t FloatToBf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof(x));
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((x >> 16) | 0x40);  // NaN
  x += 0x7FFFu + ((x >> 16) & 1u);  // round to nearest even; may overflow to inf
  return static_cast<uint16_t>(x >> 16);
}

}  // namespace llm
