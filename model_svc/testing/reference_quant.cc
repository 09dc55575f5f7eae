#include "model_svc/testing/reference_quant.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "absl/status/status.h"
#include "common/strings.h"

namespace llm::model::testing {
namespace {

using gguf::TensorType;

constexpr int64_t kQK = 32;    // elements of a Q4_0 .. Q8_0 block
constexpr int64_t kQKK = 256;  // elements of a K-quant super-block

float HalfToFloatRef(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  const uint32_t mant = h & 0x3ff;
  float magnitude;
  if (exp == 0) {
    magnitude = std::ldexp(static_cast<float>(mant), -24);
  } else if (exp == 31) {
    magnitude = mant == 0 ? INFINITY : NAN;
  } else {
    magnitude = std::ldexp(static_cast<float>(mant | 0x400), static_cast<int>(exp) - 25);
  }
  uint32_t bits;
  std::memcpy(&bits, &magnitude, 4);
  bits |= sign;
  float out;
  std::memcpy(&out, &bits, 4);
  return out;
}

// Rounds to the nearest integer, ties to even (ggml's nearest_int).
int NearestInt(float x) { return static_cast<int>(std::lrintf(x)); }

void PutHalf(std::string& out, float v) {
  const uint16_t h = FloatToHalfRef(v);
  out.append(reinterpret_cast<const char*>(&h), 2);
}

void PutU32(std::string& out, uint32_t v) { out.append(reinterpret_cast<const char*>(&v), 4); }

void AppendBytes(std::string& out, const uint8_t* p, size_t n) {
  out.append(reinterpret_cast<const char*>(p), n);
}

// Symmetric 4/5-bit: d = max / -(2^(bits-1)), where max is the value of
// largest magnitude.
void QuantizeQ4_0(const float* x, std::string& out) {
  float amax = 0, max = 0;
  for (int64_t j = 0; j < kQK; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  const float d = max / -8;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  PutHalf(out, d);
  uint8_t qs[16];
  for (int j = 0; j < 16; ++j) {
    const int xi0 = std::min(15, static_cast<int>(static_cast<int8_t>(x[j] * id + 8.5f)));
    const int xi1 = std::min(15, static_cast<int>(static_cast<int8_t>(x[16 + j] * id + 8.5f)));
    qs[j] = static_cast<uint8_t>(xi0 | (xi1 << 4));
  }
  AppendBytes(out, qs, 16);
}

void QuantizeQ4_1(const float* x, std::string& out) {
  float min = FLT_MAX, max = -FLT_MAX;
  for (int64_t j = 0; j < kQK; ++j) {
    min = std::min(min, x[j]);
    max = std::max(max, x[j]);
  }
  const float d = (max - min) / 15;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  PutHalf(out, d);
  PutHalf(out, min);
  uint8_t qs[16];
  for (int j = 0; j < 16; ++j) {
    const int xi0 = std::min(15, static_cast<int>(static_cast<int8_t>((x[j] - min) * id + 0.5f)));
    const int xi1 =
        std::min(15, static_cast<int>(static_cast<int8_t>((x[16 + j] - min) * id + 0.5f)));
    qs[j] = static_cast<uint8_t>(xi0 | (xi1 << 4));
  }
  AppendBytes(out, qs, 16);
}

void QuantizeQ5_0(const float* x, std::string& out) {
  float amax = 0, max = 0;
  for (int64_t j = 0; j < kQK; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  const float d = max / -16;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  uint32_t qh = 0;
  uint8_t qs[16];
  for (int j = 0; j < 16; ++j) {
    const int xi0 = std::min(31, static_cast<int>(static_cast<int8_t>(x[j] * id + 16.5f)));
    const int xi1 = std::min(31, static_cast<int>(static_cast<int8_t>(x[16 + j] * id + 16.5f)));
    qs[j] = static_cast<uint8_t>((xi0 & 0x0f) | ((xi1 & 0x0f) << 4));
    qh |= ((static_cast<uint32_t>(xi0) & 0x10u) >> 4) << j;
    qh |= ((static_cast<uint32_t>(xi1) & 0x10u) >> 4) << (j + 16);
  }
  PutHalf(out, d);
  PutU32(out, qh);
  AppendBytes(out, qs, 16);
}

void QuantizeQ5_1(const float* x, std::string& out) {
  float min = FLT_MAX, max = -FLT_MAX;
  for (int64_t j = 0; j < kQK; ++j) {
    min = std::min(min, x[j]);
    max = std::max(max, x[j]);
  }
  const float d = (max - min) / 31;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  uint32_t qh = 0;
  uint8_t qs[16];
  for (int j = 0; j < 16; ++j) {
    const int xi0 = std::min(31, static_cast<int>((x[j] - min) * id + 0.5f));
    const int xi1 = std::min(31, static_cast<int>((x[16 + j] - min) * id + 0.5f));
    qs[j] = static_cast<uint8_t>((xi0 & 0x0f) | ((xi1 & 0x0f) << 4));
    qh |= ((static_cast<uint32_t>(xi0) & 0x10u) >> 4) << j;
    qh |= ((static_cast<uint32_t>(xi1) & 0x10u) >> 4) << (j + 16);
  }
  PutHalf(out, d);
  PutHalf(out, min);
  PutU32(out, qh);
  AppendBytes(out, qs, 16);
}

void QuantizeQ8_0(const float* x, std::string& out) {
  float amax = 0;
  for (int64_t j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  PutHalf(out, d);
  int8_t qs[32];
  for (int j = 0; j < 32; ++j) qs[j] = static_cast<int8_t>(std::round(x[j] * id));
  out.append(reinterpret_cast<const char*>(qs), 32);
}

// The 8 sub-blocks' 6-bit scales and mins of a Q4_K / Q5_K super-block of
// 256 values, codes in [0, levels]: x ~ d * ls[j] * q - dmin * lm[j].
struct KScales {
  uint8_t packed[12] = {};  // the 12 scale bytes as stored
  int ls[8], lm[8];
  uint16_t d_half, dmin_half;
  float d, dmin;  // the stored fp16 values
};

KScales QuantizeKScales(const float* x, int levels) {
  KScales k;
  float scales[8], mins[8];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    float lo = 0, hi = -FLT_MAX;  // the minimum is clamped to <= 0, as ggml does
    for (int i = 0; i < 32; ++i) {
      lo = std::min(lo, x[32 * j + i]);
      hi = std::max(hi, x[32 * j + i]);
    }
    scales[j] = (hi - lo) / static_cast<float>(levels);
    mins[j] = -lo;
    max_scale = std::max(max_scale, scales[j]);
    max_min = std::max(max_min, mins[j]);
  }
  const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
  for (int j = 0; j < 8; ++j) {
    k.ls[j] = std::min(63, NearestInt(inv_scale * scales[j]));
    k.lm[j] = std::min(63, NearestInt(inv_min * mins[j]));
    if (j < 4) {
      k.packed[j] = static_cast<uint8_t>(k.ls[j]);
      k.packed[j + 4] = static_cast<uint8_t>(k.lm[j]);
    } else {
      k.packed[j + 4] = static_cast<uint8_t>((k.ls[j] & 0xf) | ((k.lm[j] & 0xf) << 4));
      k.packed[j - 4] |= static_cast<uint8_t>((k.ls[j] >> 4) << 6);
      k.packed[j] |= static_cast<uint8_t>((k.lm[j] >> 4) << 6);
    }
  }
  k.d_half = FloatToHalfRef(max_scale / 63.0f);
  k.dmin_half = FloatToHalfRef(max_min / 63.0f);
  k.d = HalfToFloatRef(k.d_half);
  k.dmin = HalfToFloatRef(k.dmin_half);
  return k;
}

// Q4_K: 8 sub-blocks of 32 with a 6-bit scale and a 6-bit min each:
// x = d * sc * q - dmin * m, q in [0, 15].
void QuantizeQ4_K(const float* x, std::string& out) {
  const KScales k = QuantizeKScales(x, 15);
  const int* ls = k.ls;
  const int* lm = k.lm;
  const float d = k.d, dmin = k.dmin;
  const uint16_t d_half = k.d_half, dmin_half = k.dmin_half;
  const uint8_t* packed = k.packed;
  uint8_t q[256];
  for (int j = 0; j < 8; ++j) {
    const float dj = d * static_cast<float>(ls[j]);
    const float mj = dmin * static_cast<float>(lm[j]);
    for (int i = 0; i < 32; ++i) {
      const int l = dj != 0 ? NearestInt((x[32 * j + i] + mj) / dj) : 0;
      q[32 * j + i] = static_cast<uint8_t>(std::clamp(l, 0, 15));
    }
  }
  // Each 64 values: the first 32 in the low nibbles, the next 32 in the high.
  uint8_t qs[128];
  for (int j = 0; j < 256; j += 64) {
    for (int l = 0; l < 32; ++l) {
      qs[j / 2 + l] = static_cast<uint8_t>(q[j + l] | (q[j + l + 32] << 4));
    }
  }
  out.append(reinterpret_cast<const char*>(&d_half), 2);
  out.append(reinterpret_cast<const char*>(&dmin_half), 2);
  AppendBytes(out, packed, 12);
  AppendBytes(out, qs, 128);
}

// The scale of each of `count` sub-blocks of `size` elements: its element of
// largest magnitude, sign kept, over `divisor` (ggml's make_qx_quants start);
// returns the scale of largest magnitude (0 when every one is 0).
float SignedSubBlockScales(const float* x, int count, int size, float divisor, float* scales) {
  float max_scale = 0, amax_scale = 0;
  for (int ib = 0; ib < count; ++ib) {
    float amax = 0, max = 0;
    for (int i = 0; i < size; ++i) {
      if (std::fabs(x[size * ib + i]) > amax) {
        amax = std::fabs(x[size * ib + i]);
        max = x[size * ib + i];
      }
    }
    scales[ib] = max / divisor;
    if (std::fabs(scales[ib]) > amax_scale) {
      amax_scale = std::fabs(scales[ib]);
      max_scale = scales[ib];
    }
  }
  return max_scale;
}

// Q6_K: 16 sub-blocks of 16 with an int8 scale each: x = d * sc * (q - 32),
// q in [0, 63].
void QuantizeQ6_K(const float* x, std::string& out) {
  float scales[16];
  const float max_scale = SignedSubBlockScales(x, 16, 16, -32.0f, scales);
  uint8_t ql[128] = {}, qh[64] = {};
  int8_t sc[16] = {};
  uint16_t d_half = 0;
  if (std::fabs(max_scale) > 1e-15f) {
    const float iscale = -128.0f / max_scale;
    d_half = FloatToHalfRef(1.0f / iscale);
    const float d = HalfToFloatRef(d_half);
    uint8_t q[256];
    for (int ib = 0; ib < 16; ++ib) {
      sc[ib] = static_cast<int8_t>(std::clamp(NearestInt(iscale * scales[ib]), -128, 127));
      const float dj = d * sc[ib];
      for (int i = 0; i < 16; ++i) {
        const int l = dj != 0 ? NearestInt(x[16 * ib + i] / dj) : 0;
        q[16 * ib + i] = static_cast<uint8_t>(std::clamp(l, -32, 31) + 32);
      }
    }
    for (int j = 0; j < 256; j += 128) {
      uint8_t* l_out = ql + j / 2;
      uint8_t* h_out = qh + j / 4;
      for (int l = 0; l < 32; ++l) {
        const uint8_t q1 = q[j + l] & 0xf, q2 = q[j + l + 32] & 0xf;
        const uint8_t q3 = q[j + l + 64] & 0xf, q4 = q[j + l + 96] & 0xf;
        l_out[l] = static_cast<uint8_t>(q1 | (q3 << 4));
        l_out[l + 32] = static_cast<uint8_t>(q2 | (q4 << 4));
        h_out[l] = static_cast<uint8_t>((q[j + l] >> 4) | ((q[j + l + 32] >> 4) << 2) |
                                        ((q[j + l + 64] >> 4) << 4) | ((q[j + l + 96] >> 4) << 6));
      }
    }
  }
  AppendBytes(out, ql, 128);
  AppendBytes(out, qh, 64);
  out.append(reinterpret_cast<const char*>(sc), 16);
  out.append(reinterpret_cast<const char*>(&d_half), 2);
}

// Q5_K: Q4_K with 5-bit codes, q in [0, 31]; the 5th bits in qh[32] (bit j of
// qh[l] for element 32j + l).
void QuantizeQ5_K(const float* x, std::string& out) {
  const KScales k = QuantizeKScales(x, 31);
  const int* ls = k.ls;
  const int* lm = k.lm;
  const float d = k.d, dmin = k.dmin;
  const uint16_t d_half = k.d_half, dmin_half = k.dmin_half;
  const uint8_t* packed = k.packed;
  uint8_t qh[32] = {}, qs[128] = {};
  for (int j = 0; j < 8; ++j) {
    const float dj = d * static_cast<float>(ls[j]);
    const float mj = dmin * static_cast<float>(lm[j]);
    for (int i = 0; i < 32; ++i) {
      const int l = dj != 0 ? std::clamp(NearestInt((x[32 * j + i] + mj) / dj), 0, 31) : 0;
      qs[32 * (j / 2) + i] |= static_cast<uint8_t>((l & 0xf) << (4 * (j % 2)));
      qh[i] |= static_cast<uint8_t>((l >> 4) << j);
    }
  }
  out.append(reinterpret_cast<const char*>(&d_half), 2);
  out.append(reinterpret_cast<const char*>(&dmin_half), 2);
  AppendBytes(out, packed, 12);
  AppendBytes(out, qh, 32);
  AppendBytes(out, qs, 128);
}

// Q3_K: 16 sub-blocks of 16 with a 6-bit signed scale (stored + 32) each:
// x = d * sc * q, q in [-4, 3], stored as 2 low bits in qs (element 32j + l:
// qs[32 * (j / 4) + l], bits 2 * (j % 4)) and hmask bit j of byte l set when
// q >= 0.
void QuantizeQ3_K(const float* x, std::string& out) {
  float scales[16];
  const float max_scale = SignedSubBlockScales(x, 16, 16, -4.0f, scales);
  uint8_t hmask[32] = {}, qs[64] = {}, packed[12] = {};
  uint16_t d_half = 0;
  int q[256] = {};
  if (std::fabs(max_scale) > 1e-15f) {
    const float iscale = -32.0f / max_scale;
    d_half = FloatToHalfRef(1.0f / iscale);
    const float d = HalfToFloatRef(d_half);
    for (int ib = 0; ib < 16; ++ib) {
      const int sc = std::clamp(NearestInt(iscale * scales[ib]), -32, 31);
      const int stored = sc + 32;
      if (ib < 8) {
        packed[ib] |= static_cast<uint8_t>(stored & 0xf);
      } else {
        packed[ib - 8] |= static_cast<uint8_t>((stored & 0xf) << 4);
      }
      packed[8 + ib % 4] |= static_cast<uint8_t>((stored >> 4) << (2 * (ib / 4)));
      const float dj = d * static_cast<float>(sc);
      for (int i = 0; i < 16; ++i) {
        q[16 * ib + i] = dj != 0 ? std::clamp(NearestInt(x[16 * ib + i] / dj), -4, 3) : 0;
      }
    }
  } else {
    for (int ib = 0; ib < 16; ++ib) {  // scale 0 (stored 32)
      packed[8 + ib % 4] |= static_cast<uint8_t>(2 << (2 * (ib / 4)));
    }
  }
  for (int j = 0; j < 8; ++j) {
    for (int l = 0; l < 32; ++l) {
      const int code = q[32 * j + l] + 4;  // [0, 7]
      qs[32 * (j / 4) + l] |= static_cast<uint8_t>((code & 3) << (2 * (j % 4)));
      hmask[l] |= static_cast<uint8_t>((code >> 2) << j);
    }
  }
  AppendBytes(out, hmask, 32);
  AppendBytes(out, qs, 64);
  AppendBytes(out, packed, 12);
  out.append(reinterpret_cast<const char*>(&d_half), 2);
}

// Q2_K: 16 sub-blocks of 16 with a 4-bit scale and a 4-bit min each:
// x = d * sc * q - dmin * mn, q in [0, 3] (qs as in Q3_K).
void QuantizeQ2_K(const float* x, std::string& out) {
  float scales[16], mins[16];
  float max_scale = 0, max_min = 0;
  for (int ib = 0; ib < 16; ++ib) {
    float lo = 0, hi = -FLT_MAX;
    for (int i = 0; i < 16; ++i) {
      lo = std::min(lo, x[16 * ib + i]);
      hi = std::max(hi, x[16 * ib + i]);
    }
    scales[ib] = (hi - lo) / 3;
    mins[ib] = -lo;
    max_scale = std::max(max_scale, scales[ib]);
    max_min = std::max(max_min, mins[ib]);
  }
  const uint16_t d_half = FloatToHalfRef(max_scale / 15.0f);
  const uint16_t dmin_half = FloatToHalfRef(max_min / 15.0f);
  const float d = HalfToFloatRef(d_half), dmin = HalfToFloatRef(dmin_half);
  uint8_t sm[16], qs[64] = {};
  int q[256];
  for (int ib = 0; ib < 16; ++ib) {
    const int sc = d > 0 ? std::clamp(NearestInt(scales[ib] / d), 0, 15) : 0;
    const int mn = dmin > 0 ? std::clamp(NearestInt(mins[ib] / dmin), 0, 15) : 0;
    sm[ib] = static_cast<uint8_t>(sc | (mn << 4));
    const float dl = d * static_cast<float>(sc), ml = dmin * static_cast<float>(mn);
    for (int i = 0; i < 16; ++i) {
      q[16 * ib + i] = dl != 0 ? std::clamp(NearestInt((x[16 * ib + i] + ml) / dl), 0, 3) : 0;
    }
  }
  for (int j = 0; j < 8; ++j) {
    for (int l = 0; l < 32; ++l) {
      qs[32 * (j / 4) + l] |= static_cast<uint8_t>(q[32 * j + l] << (2 * (j % 4)));
    }
  }
  AppendBytes(out, sm, 16);
  AppendBytes(out, qs, 64);
  out.append(reinterpret_cast<const char*>(&d_half), 2);
  out.append(reinterpret_cast<const char*>(&dmin_half), 2);
}

// ggml's kvalues_iq4nl: the 16 levels of IQ4_NL and IQ4_XS.
constexpr int kIQ4Levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                1,    13,   25,  38,  53,  69,  89,  113};

// The index of the level nearest to v.
int NearestIQ4Level(float v) {
  int best = 0;
  for (int k = 1; k < 16; ++k) {
    if (std::fabs(v - static_cast<float>(kIQ4Levels[k])) <
        std::fabs(v - static_cast<float>(kIQ4Levels[best]))) {
      best = k;
    }
  }
  return best;
}

// 32 values as IQ4 nibbles with scale d (low nibbles elements 0..15).
void PackIQ4(const float* x, float d, uint8_t qs[16]) {
  const float id = d != 0 ? 1.0f / d : 0.0f;
  for (int l = 0; l < 16; ++l) {
    qs[l] =
        static_cast<uint8_t>(NearestIQ4Level(x[l] * id) | (NearestIQ4Level(x[l + 16] * id) << 4));
  }
}

// IQ4_NL: d maps the value of largest magnitude to the level -127.
void QuantizeIQ4_NL(const float* x, std::string& out) {
  float amax = 0, max = 0;
  for (int64_t j = 0; j < kQK; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  const uint16_t d_half = FloatToHalfRef(max / -127.0f);
  uint8_t qs[16];
  PackIQ4(x, HalfToFloatRef(d_half), qs);
  out.append(reinterpret_cast<const char*>(&d_half), 2);
  AppendBytes(out, qs, 16);
}

// IQ4_XS: 8 sub-blocks of 32, each with a 6-bit signed scale ls - 32 times
// the super-block's d; codes as IQ4_NL's.
void QuantizeIQ4_XS(const float* x, std::string& out) {
  float scales[8];
  const float max_scale = SignedSubBlockScales(x, 8, 32, -127.0f, scales);
  uint16_t d_half = 0, scales_h = 0;
  uint8_t scales_l[4] = {}, qs[128] = {};
  const float id = std::fabs(max_scale) > 1e-15f ? -32.0f / max_scale : 0.0f;
  if (id != 0) d_half = FloatToHalfRef(1.0f / id);
  const float d = HalfToFloatRef(d_half);
  for (int j = 0; j < 8; ++j) {
    const int l = std::clamp(NearestInt(id * scales[j]), -32, 31);
    const int ls = l + 32;
    scales_l[j / 2] |= static_cast<uint8_t>((ls & 0xf) << (4 * (j % 2)));
    scales_h |= static_cast<uint16_t>((ls >> 4) << (2 * j));
    PackIQ4(x + 32 * j, d * static_cast<float>(l), qs + 16 * j);
  }
  out.append(reinterpret_cast<const char*>(&d_half), 2);
  out.append(reinterpret_cast<const char*>(&scales_h), 2);
  AppendBytes(out, scales_l, 4);
  AppendBytes(out, qs, 128);
}

}  // namespace

uint16_t FloatToHalfRef(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00;   // NaN
  if (abs >= 0x477ff000u) return sign | 0x7c00;  // rounds to 65536 or more: infinity
  if (abs < 0x38800000u) {                       // below 2^-14: subnormal (or zero)
    // Units of 2^-24; exact scaling, then round half to even.
    return sign | static_cast<uint16_t>(std::lrintf(std::fabs(f) * 16777216.0f));
  }
  const uint32_t exp = (abs >> 23) - 127 + 15;
  const uint32_t mant = abs & 0x7fffff;
  uint32_t h = (exp << 10) | (mant >> 13);
  const uint32_t rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1) != 0)) ++h;  // may carry into the exponent
  return sign | static_cast<uint16_t>(h);
}

uint16_t FloatToBf16Ref(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 64);  // quiet NaN
  return static_cast<uint16_t>((x + (0x7fff + ((x >> 16) & 1))) >> 16);
}

absl::StatusOr<std::string> QuantizeMatrix(gguf::TensorType type, std::span<const float> values,
                                           int64_t cols) {
  const gguf::TensorTypeTraits* traits = gguf::FindTensorTypeTraits(static_cast<uint32_t>(type));
  const std::string name =
      traits != nullptr ? std::string(traits->name) : StrCat("type ", static_cast<uint32_t>(type));
  int64_t block = 0;
  void (*quantize_block)(const float*, std::string&) = nullptr;
  switch (type) {
    case TensorType::kF32:
    case TensorType::kF16:
    case TensorType::kBF16:
      block = 1;
      break;
    case TensorType::kQ4_0:
      block = kQK, quantize_block = QuantizeQ4_0;
      break;
    case TensorType::kQ4_1:
      block = kQK, quantize_block = QuantizeQ4_1;
      break;
    case TensorType::kQ5_0:
      block = kQK, quantize_block = QuantizeQ5_0;
      break;
    case TensorType::kQ5_1:
      block = kQK, quantize_block = QuantizeQ5_1;
      break;
    case TensorType::kQ8_0:
      block = kQK, quantize_block = QuantizeQ8_0;
      break;
    case TensorType::kQ4_K:
      block = kQKK, quantize_block = QuantizeQ4_K;
      break;
    case TensorType::kQ6_K:
      block = kQKK, quantize_block = QuantizeQ6_K;
      break;
    case TensorType::kQ2_K:
      block = kQKK, quantize_block = QuantizeQ2_K;
      break;
    case TensorType::kQ3_K:
      block = kQKK, quantize_block = QuantizeQ3_K;
      break;
    case TensorType::kQ5_K:
      block = kQKK, quantize_block = QuantizeQ5_K;
      break;
    case TensorType::kIQ4_NL:
      block = kQK, quantize_block = QuantizeIQ4_NL;
      break;
    case TensorType::kIQ4_XS:
      block = kQKK, quantize_block = QuantizeIQ4_XS;
      break;
    default:
      return absl::UnimplementedError(StrCat("reference quantizer: ", name, " is not supported"));
  }
  if (cols < 1 || cols % block != 0 || values.size() % cols != 0) {
    return absl::InvalidArgumentError(StrCat("reference quantizer: rows of ", cols,
                                             " elements do not split into ", name, " blocks of ",
                                             block));
  }
  std::string out;
  out.reserve(values.size() / block * traits->block_bytes);
  if (type == TensorType::kF32) {
    out.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
  } else if (type == TensorType::kF16 || type == TensorType::kBF16) {
    for (float v : values) {
      const uint16_t h = type == TensorType::kF16 ? FloatToHalfRef(v) : FloatToBf16Ref(v);
      out.append(reinterpret_cast<const char*>(&h), 2);
    }
  } else {
    for (size_t i = 0; i < values.size(); i += block) quantize_block(values.data() + i, out);
  }
  return out;
}

}  // namespace llm::model::testing
