// Portable code of the CPU kernels: shape checks, the scalar reference
// kernels and the run-time choice between them, AVX2 and AVX-512 VNNI.
#include "model_svc/kernels/quant.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "absl/strings/str_cat.h"
#include "common/half.h"
#include "model_svc/kernels/quant_internal.h"

namespace llm::cpu {

// ---------------------------------------------------------------------------
// Types and shapes.

bool IsSupportedWeightType(TensorType type) {
  switch (type) {
    case TensorType::kF32:
    case TensorType::kF16:
    case TensorType::kBF16:
    case TensorType::kQ4_0:
    case TensorType::kQ4_1:
    case TensorType::kQ5_0:
    case TensorType::kQ5_1:
    case TensorType::kQ8_0:
    case TensorType::kQ2_K:
    case TensorType::kQ3_K:
    case TensorType::kQ4_K:
    case TensorType::kQ5_K:
    case TensorType::kQ6_K:
    case TensorType::kIQ4_NL:
    case TensorType::kIQ4_XS:
      return true;
    default:
      return false;
  }
}

namespace {

std::string TypeName(TensorType type) {
  const gguf::TensorTypeTraits* traits = gguf::FindTensorTypeTraits(static_cast<uint32_t>(type));
  if (traits != nullptr) return std::string(traits->name);
  return absl::StrCat("type id ", static_cast<uint32_t>(type));
}

}  // namespace

absl::Status CheckWeightShape(TensorType type, int64_t cols) {
  if (!IsSupportedWeightType(type)) {
    return absl::InvalidArgumentError(
        absl::StrCat("CPU kernels do not support weight type ", TypeName(type)));
  }
  const int64_t block = internal::BlockElements(type);
  const int64_t multiple = std::max<int64_t>(block, kQ8Block);
  if (cols <= 0 || cols % multiple != 0) {
    return absl::InvalidArgumentError(absl::StrCat("weight type ", TypeName(type), ": row length ",
                                                   cols, " is not a positive multiple of ",
                                                   multiple));
  }
  return absl::OkStatus();
}

size_t RowBytes(TensorType type, int64_t cols) {
  const gguf::TensorTypeTraits* traits = gguf::FindTensorTypeTraits(static_cast<uint32_t>(type));
  if (traits == nullptr) internal::Fatal("RowBytes: unknown tensor type");
  return static_cast<size_t>(cols) / traits->block_elements * traits->block_bytes;
}

namespace internal {

[[noreturn]] void Fatal(const char* what) {
  std::fprintf(stderr, "llm::cpu kernels: %s\n", what);
  std::abort();
}

int64_t BlockElements(TensorType type) {
  switch (type) {
    case TensorType::kF32:
    case TensorType::kF16:
    case TensorType::kBF16:
      return 1;
    case TensorType::kQ4_0:
    case TensorType::kQ4_1:
    case TensorType::kQ5_0:
    case TensorType::kQ5_1:
    case TensorType::kQ8_0:
    case TensorType::kIQ4_NL:
      return 32;
    case TensorType::kQ2_K:
    case TensorType::kQ3_K:
    case TensorType::kQ4_K:
    case TensorType::kQ5_K:
    case TensorType::kQ6_K:
    case TensorType::kIQ4_XS:
      return kSuperBlock;
    default:
      Fatal("unsupported weight type");
  }
}

bool CpuHasAvx2Fma() {
#if defined(__x86_64__) || defined(__i386__)
  // Every AVX2 CPU has F16C; it is checked anyway (virtual machines may hide
  // features one by one). __builtin_cpu_supports("f16c") is GCC-only.
  unsigned eax, ebx, ecx, edx;
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
#else
  return false;
#endif
}

bool CpuHasAvx512Vnni() {
#if defined(__x86_64__) || defined(__i386__)
  // __builtin_cpu_supports also checks that the OS saves the zmm and mask
  // registers (XCR0), for every AVX-512 feature.
  return CpuHasAvx2Fma() && __builtin_cpu_supports("avx512f") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512vnni");
#else
  return false;
#endif
}

// ---------------------------------------------------------------------------
// Scalar reference kernels.
//
// Every 32-element block is decoded to integers q[32] plus float scales, so
// that dequantization and the dot products share one decoder per format.
// Dot products follow the canonical order of quant.h literally (this file is
// compiled with -ffp-contract=off and every fused step is an explicit fma);
// the AVX2 kernels reproduce it bit for bit.

namespace {

float Half(const uint8_t* p) { return HalfToFloat(LoadU16(p)); }

// Q4_0 / Q4_1 nibbles: low nibbles are elements 0..15, high nibbles 16..31.
void DecodeNibbles(const uint8_t* qs, int offset, int q[32]) {
  for (int j = 0; j < 16; ++j) {
    q[j] = (qs[j] & 0x0F) - offset;
    q[j + 16] = (qs[j] >> 4) - offset;
  }
}

// Q5_0 / Q5_1: nibbles plus bit k of qh as the 5th bit of element k.
void DecodeFiveBits(const uint8_t* qh_bytes, const uint8_t* qs, int offset, int q[32]) {
  const uint32_t qh = LoadU32(qh_bytes);
  for (int j = 0; j < 16; ++j) {
    q[j] = ((qs[j] & 0x0F) | static_cast<int>(((qh >> j) & 1u) << 4)) - offset;
    q[j + 16] = ((qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4)) - offset;
  }
}

// Q4_K sub-block j (0..7) of super-block `b`: 4-bit q with scale d*sc and
// min dmin*mn, y = (d*sc) * q - (dmin*mn).
void DecodeQ4K(const uint8_t* b, int j, int q[32], float* scale, float* min) {
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
void DecodeQ6K(const uint8_t* b, int j, int q[32]) {
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

int8_t Q6KScale(const uint8_t* b, int i) { return static_cast<int8_t>(b[192 + i]); }

// Q5_K sub-block j (0..7) of super-block `b`: Q4_K's nibbles and scales plus
// bit j of qh[l] as the 5th bit of element l; y = (d*sc) * q - (dmin*mn).
void DecodeQ5K(const uint8_t* b, int j, int q[32], float* scale, float* min) {
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
void DecodeTwoBits(const uint8_t* qs, int j, int q[32]) {
  const uint8_t* p = qs + 32 * (j / 4);
  const int shift = 2 * (j % 4);
  for (int l = 0; l < 32; ++l) q[l] = (p[l] >> shift) & 3;
}

// Q3_K elements 32j..32j+31 as signed q in [-4, 3]: the 2-bit code minus 4
// unless bit j of hmask[l] is set.
void DecodeQ3K(const uint8_t* b, int j, int q[32]) {
  DecodeTwoBits(b + 32, j, q);
  for (int l = 0; l < 32; ++l) q[l] -= ((b[l] >> j) & 1) != 0 ? 0 : 4;
}

// IQ4_NL / IQ4_XS: 16 bytes of indices into kIQ4NLValues, low nibbles
// elements 0..15, high nibbles 16..31.
void DecodeIQ4(const uint8_t* qs, int q[32]) {
  for (int l = 0; l < 16; ++l) {
    q[l] = kIQ4NLValues[qs[l] & 0x0F];
    q[l + 16] = kIQ4NLValues[qs[l] >> 4];
  }
}

int SumInt16(const int8_t* x) {
  int s = 0;
  for (int l = 0; l < 16; ++l) s += x[l];
  return s;
}

int DotInt(const int q[32], const int8_t x[32]) {
  int s = 0;
  for (int l = 0; l < 32; ++l) s += q[l] * x[l];
  return s;
}

int DotInt16(const int* q, const int8_t* x) {
  int s = 0;
  for (int l = 0; l < 16; ++l) s += q[l] * x[l];
  return s;
}

// Float weights: one fp32 value per element. Lane k (0..7) accumulates the
// products of elements k, k + 8, k + 16, ... with one fma each, then the
// lanes are added in a fixed tree (the AVX2 kernels' 8 lanes and horizontal
// sum).
template <class Load>
float DotFloat(Load load, const float* x, int64_t n) {
  float lane[8] = {};
  for (int64_t i = 0; i < n; i += 8) {
    for (int k = 0; k < 8; ++k) lane[k] = std::fma(load(i + k), x[i + k], lane[k]);
  }
  const float s0 = lane[0] + lane[4], s1 = lane[1] + lane[5];
  const float s2 = lane[2] + lane[6], s3 = lane[3] + lane[7];
  return (s0 + s2) + (s1 + s3);
}

// One canonical block step: acc = fma(d_w * x.d, isum, acc).
float BlockStep(float acc, float dw, const BlockQ8& x, int isum) {
  return std::fma(dw * x.d, static_cast<float>(isum), acc);
}

// The min term of a block: acc = fma(m_w, x.s, acc).
float MinStep(float acc, float mw, const BlockQ8& x) { return std::fma(mw, x.s, acc); }

}  // namespace

void DequantizeRowScalar(TensorType type, const void* row, float* out, int64_t n) {
  const auto* p = static_cast<const uint8_t*>(row);
  int q[32];
  switch (type) {
    case TensorType::kF32:
      std::memcpy(out, p, static_cast<size_t>(n) * sizeof(float));
      return;
    case TensorType::kF16:
      for (int64_t i = 0; i < n; ++i) out[i] = Half(p + 2 * i);
      return;
    case TensorType::kBF16:
      for (int64_t i = 0; i < n; ++i) out[i] = Bf16ToFloat(LoadU16(p + 2 * i));
      return;
    case TensorType::kQ4_0:
      for (int64_t b = 0; b < n / 32; ++b, p += kQ4_0Bytes, out += 32) {
        const float d = Half(p);
        DecodeNibbles(p + 2, 8, q);
        for (int l = 0; l < 32; ++l) out[l] = d * static_cast<float>(q[l]);
      }
      return;
    case TensorType::kQ4_1:
      for (int64_t b = 0; b < n / 32; ++b, p += kQ4_1Bytes, out += 32) {
        const float d = Half(p), m = Half(p + 2);
        DecodeNibbles(p + 4, 0, q);
        for (int l = 0; l < 32; ++l) out[l] = d * static_cast<float>(q[l]) + m;
      }
      return;
    case TensorType::kQ5_0:
      for (int64_t b = 0; b < n / 32; ++b, p += kQ5_0Bytes, out += 32) {
        const float d = Half(p);
        DecodeFiveBits(p + 2, p + 6, 16, q);
        for (int l = 0; l < 32; ++l) out[l] = d * static_cast<float>(q[l]);
      }
      return;
    case TensorType::kQ5_1:
      for (int64_t b = 0; b < n / 32; ++b, p += kQ5_1Bytes, out += 32) {
        const float d = Half(p), m = Half(p + 2);
        DecodeFiveBits(p + 4, p + 8, 0, q);
        for (int l = 0; l < 32; ++l) out[l] = d * static_cast<float>(q[l]) + m;
      }
      return;
    case TensorType::kQ8_0:
      for (int64_t b = 0; b < n / 32; ++b, p += kQ8_0Bytes, out += 32) {
        const float d = Half(p);
        for (int l = 0; l < 32; ++l) out[l] = d * static_cast<float>(static_cast<int8_t>(p[2 + l]));
      }
      return;
    case TensorType::kQ4_K:
      for (int64_t b = 0; b < n / kSuperBlock; ++b, p += kQ4_KBytes) {
        for (int j = 0; j < 8; ++j, out += 32) {
          float scale, min;
          DecodeQ4K(p, j, q, &scale, &min);
          for (int l = 0; l < 32; ++l) out[l] = scale * static_cast<float>(q[l]) - min;
        }
      }
      return;
    case TensorType::kQ6_K:
      for (int64_t b = 0; b < n / kSuperBlock; ++b, p += kQ6_KBytes) {
        const float d = Half(p + 208);
        for (int j = 0; j < 8; ++j, out += 32) {
          DecodeQ6K(p, j, q);
          const float s0 = d * Q6KScale(p, 2 * j), s1 = d * Q6KScale(p, 2 * j + 1);
          for (int l = 0; l < 16; ++l) out[l] = s0 * static_cast<float>(q[l]);
          for (int l = 16; l < 32; ++l) out[l] = s1 * static_cast<float>(q[l]);
        }
      }
      return;
    case TensorType::kQ5_K:
      for (int64_t b = 0; b < n / kSuperBlock; ++b, p += kQ5_KBytes) {
        for (int j = 0; j < 8; ++j, out += 32) {
          float scale, min;
          DecodeQ5K(p, j, q, &scale, &min);
          for (int l = 0; l < 32; ++l) out[l] = scale * static_cast<float>(q[l]) - min;
        }
      }
      return;
    case TensorType::kQ3_K:
      for (int64_t b = 0; b < n / kSuperBlock; ++b, p += kQ3_KBytes) {
        const float d = Half(p + 108);
        int8_t sc[16];
        Q3KScales(p + 96, sc);
        for (int j = 0; j < 8; ++j, out += 32) {
          DecodeQ3K(p, j, q);
          const float s0 = d * sc[2 * j], s1 = d * sc[2 * j + 1];
          for (int l = 0; l < 16; ++l) out[l] = s0 * static_cast<float>(q[l]);
          for (int l = 16; l < 32; ++l) out[l] = s1 * static_cast<float>(q[l]);
        }
      }
      return;
    case TensorType::kQ2_K:
      for (int64_t b = 0; b < n / kSuperBlock; ++b, p += kQ2_KBytes) {
        const float d = Half(p + 80), dmin = Half(p + 82);
        for (int j = 0; j < 8; ++j, out += 32) {
          DecodeTwoBits(p + 16, j, q);
          for (int h = 0; h < 2; ++h) {
            const uint8_t sm = p[2 * j + h];
            const float dl = d * static_cast<float>(sm & 0x0F);
            const float ml = dmin * static_cast<float>(sm >> 4);
            for (int l = 16 * h; l < 16 * h + 16; ++l) out[l] = dl * static_cast<float>(q[l]) - ml;
          }
        }
      }
      return;
    case TensorType::kIQ4_NL:
      for (int64_t b = 0; b < n / 32; ++b, p += kIQ4_NLBytes, out += 32) {
        const float d = Half(p);
        DecodeIQ4(p + 2, q);
        for (int l = 0; l < 32; ++l) out[l] = d * static_cast<float>(q[l]);
      }
      return;
    case TensorType::kIQ4_XS:
      for (int64_t b = 0; b < n / kSuperBlock; ++b, p += kIQ4_XSBytes) {
        const float d = Half(p);
        for (int j = 0; j < 8; ++j, out += 32) {
          const float dl = d * static_cast<float>(IQ4XSScale(p, j));
          DecodeIQ4(p + 8 + 16 * j, q);
          for (int l = 0; l < 32; ++l) out[l] = dl * static_cast<float>(q[l]);
        }
      }
      return;
    default:
      Fatal("DequantizeRow: unsupported weight type");
  }
}

void QuantizeQ8Scalar(const float* x, BlockQ8* out, int64_t n) {
  for (int64_t b = 0; b < n / kQ8Block; ++b, x += kQ8Block) {
    float amax = 0.0f;
    for (int l = 0; l < 32; ++l) amax = std::max(amax, std::fabs(x[l]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    int sum = 0;
    for (int l = 0; l < 32; ++l) {
      // Clamping first keeps the conversion defined for any input; rounding is
      // half to even (the default floating-point environment), as in AVX2.
      const float v = std::fmin(std::fmax(x[l] * id, -127.0f), 127.0f);
      const int q = static_cast<int>(std::nearbyint(v));
      out[b].q[l] = static_cast<int8_t>(q);
      sum += q;
    }
    out[b].d = d;
    out[b].s = d * static_cast<float>(sum);
  }
}

float DotRowScalar(TensorType type, const void* w, const ActRow& x, int64_t n) {
  const auto* p = static_cast<const uint8_t*>(w);
  const BlockQ8* xq = x.q8;
  const int64_t nb = n / 32;
  int q[32];
  float acc = 0.0f;
  switch (type) {
    case TensorType::kF32:
      return DotFloat(
          [p](int64_t i) {
            float v;
            std::memcpy(&v, p + 4 * i, sizeof(v));
            return v;
          },
          x.f32, n);
    case TensorType::kF16:
      return DotFloat([p](int64_t i) { return Half(p + 2 * i); }, x.f32, n);
    case TensorType::kBF16:
      return DotFloat([p](int64_t i) { return Bf16ToFloat(LoadU16(p + 2 * i)); }, x.f32, n);
    case TensorType::kQ4_0:
      for (int64_t b = 0; b < nb; ++b, p += kQ4_0Bytes) {
        DecodeNibbles(p + 2, 8, q);
        acc = BlockStep(acc, Half(p), xq[b], DotInt(q, xq[b].q));
      }
      return acc;
    case TensorType::kQ4_1:
      for (int64_t b = 0; b < nb; ++b, p += kQ4_1Bytes) {
        DecodeNibbles(p + 4, 0, q);
        acc = BlockStep(acc, Half(p), xq[b], DotInt(q, xq[b].q));
        acc = MinStep(acc, Half(p + 2), xq[b]);
      }
      return acc;
    case TensorType::kQ5_0:
      for (int64_t b = 0; b < nb; ++b, p += kQ5_0Bytes) {
        DecodeFiveBits(p + 2, p + 6, 16, q);
        acc = BlockStep(acc, Half(p), xq[b], DotInt(q, xq[b].q));
      }
      return acc;
    case TensorType::kQ5_1:
      for (int64_t b = 0; b < nb; ++b, p += kQ5_1Bytes) {
        DecodeFiveBits(p + 4, p + 8, 0, q);
        acc = BlockStep(acc, Half(p), xq[b], DotInt(q, xq[b].q));
        acc = MinStep(acc, Half(p + 2), xq[b]);
      }
      return acc;
    case TensorType::kQ8_0:
      for (int64_t b = 0; b < nb; ++b, p += kQ8_0Bytes) {
        for (int l = 0; l < 32; ++l) q[l] = static_cast<int8_t>(p[2 + l]);
        acc = BlockStep(acc, Half(p), xq[b], DotInt(q, xq[b].q));
      }
      return acc;
    case TensorType::kQ4_K:
      for (int64_t b = 0; b < nb; b += 8, p += kQ4_KBytes) {
        for (int j = 0; j < 8; ++j) {
          float scale, min;
          DecodeQ4K(p, j, q, &scale, &min);
          const BlockQ8& xb = xq[b + j];
          acc = BlockStep(acc, scale, xb, DotInt(q, xb.q));
          acc = MinStep(acc, -min, xb);
        }
      }
      return acc;
    case TensorType::kQ6_K:
      for (int64_t b = 0; b < nb; b += 8, p += kQ6_KBytes) {
        const float d = Half(p + 208);
        for (int j = 0; j < 8; ++j) {
          DecodeQ6K(p, j, q);
          const BlockQ8& xb = xq[b + j];
          // Exact: |isum| <= 2 * 16 * 32 * 128 * 127 < 2^24.
          const int isum = Q6KScale(p, 2 * j) * DotInt16(q, xb.q) +
                           Q6KScale(p, 2 * j + 1) * DotInt16(q + 16, xb.q + 16);
          acc = BlockStep(acc, d, xb, isum);
        }
      }
      return acc;
    case TensorType::kQ5_K:
      for (int64_t b = 0; b < nb; b += 8, p += kQ5_KBytes) {
        for (int j = 0; j < 8; ++j) {
          float scale, min;
          DecodeQ5K(p, j, q, &scale, &min);
          const BlockQ8& xb = xq[b + j];
          acc = BlockStep(acc, scale, xb, DotInt(q, xb.q));
          acc = MinStep(acc, -min, xb);
        }
      }
      return acc;
    case TensorType::kQ3_K:
      for (int64_t b = 0; b < nb; b += 8, p += kQ3_KBytes) {
        const float d = Half(p + 108);
        int8_t sc[16];
        Q3KScales(p + 96, sc);
        for (int j = 0; j < 8; ++j) {
          DecodeQ3K(p, j, q);
          const BlockQ8& xb = xq[b + j];
          const int isum =
              sc[2 * j] * DotInt16(q, xb.q) + sc[2 * j + 1] * DotInt16(q + 16, xb.q + 16);
          acc = BlockStep(acc, d, xb, isum);
        }
      }
      return acc;
    case TensorType::kQ2_K:
      for (int64_t b = 0; b < nb; b += 8, p += kQ2_KBytes) {
        const float d = Half(p + 80), dmin = Half(p + 82);
        for (int j = 0; j < 8; ++j) {
          DecodeTwoBits(p + 16, j, q);
          const BlockQ8& xb = xq[b + j];
          const uint8_t lo = p[2 * j], hi = p[2 * j + 1];
          const int isum =
              (lo & 0x0F) * DotInt16(q, xb.q) + (hi & 0x0F) * DotInt16(q + 16, xb.q + 16);
          const int msum = (lo >> 4) * SumInt16(xb.q) + (hi >> 4) * SumInt16(xb.q + 16);
          acc = BlockStep(acc, d, xb, isum);
          acc = BlockStep(acc, -dmin, xb, msum);
        }
      }
      return acc;
    case TensorType::kIQ4_NL:
      for (int64_t b = 0; b < nb; ++b, p += kIQ4_NLBytes) {
        DecodeIQ4(p + 2, q);
        acc = BlockStep(acc, Half(p), xq[b], DotInt(q, xq[b].q));
      }
      return acc;
    case TensorType::kIQ4_XS:
      for (int64_t b = 0; b < nb; b += 8, p += kIQ4_XSBytes) {
        const float d = Half(p);
        for (int j = 0; j < 8; ++j) {
          DecodeIQ4(p + 8 + 16 * j, q);
          const BlockQ8& xb = xq[b + j];
          acc = BlockStep(acc, d * static_cast<float>(IQ4XSScale(p, j)), xb, DotInt(q, xb.q));
        }
      }
      return acc;
    default:
      Fatal("DotRow: unsupported weight type");
  }
}

void MatMulTileScalar(TensorType type, const uint8_t* w, size_t row_bytes, int64_t n, int64_t r0,
                      int64_t r1, const ActRow* x, int64_t num_tokens, float* out,
                      int64_t out_stride) {
  for (int64_t r = r0; r < r1; ++r) {
    for (int64_t t = 0; t < num_tokens; ++t) {
      out[t * out_stride + r] = DotRowScalar(type, w + static_cast<size_t>(r) * row_bytes, x[t], n);
    }
  }
}

// ---------------------------------------------------------------------------
// Dispatch.

namespace {

struct KernelSet {
  std::string_view isa;
  void (*dequantize_row)(TensorType, const void*, float*, int64_t);
  void (*quantize_q8)(const float*, BlockQ8*, int64_t);
  float (*dot_row)(TensorType, const void*, const ActRow&, int64_t);
  void (*matmul_tile)(TensorType, const uint8_t*, size_t, int64_t, int64_t, int64_t, const ActRow*,
                      int64_t, float*, int64_t);
};

const KernelSet& Active() {
  static const KernelSet kernels = [] {
    if (CpuHasAvx512Vnni()) {
      return KernelSet{"avx512vnni", DequantizeRowAvx2, QuantizeQ8Avx512, DotRowAvx512Vnni,
                       MatMulTileAvx512Vnni};
    }
    if (CpuHasAvx2Fma()) {
      return KernelSet{"avx2", DequantizeRowAvx2, QuantizeQ8Avx2, DotRowAvx2, MatMulTileAvx2};
    }
    return KernelSet{"scalar", DequantizeRowScalar, QuantizeQ8Scalar, DotRowScalar,
                     MatMulTileScalar};
  }();
  return kernels;
}

}  // namespace
}  // namespace internal

void DequantizeRow(TensorType type, const void* row, float* out, int64_t n) {
  internal::Active().dequantize_row(type, row, out, n);
}

void QuantizeQ8(const float* x, BlockQ8* out, int64_t n) {
  internal::Active().quantize_q8(x, out, n);
}

float DotRow(TensorType type, const void* w, const ActRow& x, int64_t n) {
  return internal::Active().dot_row(type, w, x, n);
}

void MatMulTile(TensorType type, const uint8_t* w, size_t row_bytes, int64_t n, int64_t r0,
                int64_t r1, const ActRow* x, int64_t num_tokens, float* out, int64_t out_stride) {
  internal::Active().matmul_tile(type, w, row_bytes, n, r0, r1, x, num_tokens, out, out_stride);
}

namespace {
thread_local uint64_t current_scope = 0;
std::atomic<uint64_t> last_scope{0};
}  // namespace

SameActivationsScope::SameActivationsScope() {
  current_scope = last_scope.fetch_add(1, std::memory_order_relaxed) + 1;
}
SameActivationsScope::~SameActivationsScope() { current_scope = 0; }

uint64_t internal::CurrentActivationsScope() { return current_scope; }

std::string_view KernelIsa() { return internal::Active().isa; }

}  // namespace llm::cpu
