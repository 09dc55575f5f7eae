// Portable code of the CPU kernels: the scalar reference kernels and the
// run-time choice between them, AVX2 and AVX-512 VNNI.
#include "model_svc/kernels/quant.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "common/half.h"
#include "model_svc/formats/block_decode.h"
#include "model_svc/formats/dequantize.h"
#include "model_svc/kernels/quant_internal.h"

namespace llm::kernels {
namespace internal {

[[noreturn]] void Fatal(const char* what) {
  std::fprintf(stderr, "llm::kernels: %s\n", what);
  std::abort();
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

bool CpuHasAmxInt8() {
#if defined(__x86_64__)
  static const bool usable = [] {
    if (!CpuHasAvx512Vnni()) return false;
    unsigned eax, ebx, ecx, edx;
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
    constexpr unsigned kAmxTile = 1u << 24, kAmxInt8 = 1u << 25;
    if ((edx & kAmxTile) == 0 || (edx & kAmxInt8) == 0) return false;
    // XCR0: the OS manages XTILECFG (bit 17) and XTILEDATA (bit 18).
    unsigned xcr0_lo, xcr0_hi;
    __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
    constexpr unsigned kTileState = (1u << 17) | (1u << 18);
    if ((xcr0_lo & kTileState) != kTileState) return false;
    // Linux hands out the tile data state on request, per process
    // (Documentation/arch/x86/xstate.rst); without it TILELOADD faults.
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return usable;
#else
  return false;
#endif
}

// ---------------------------------------------------------------------------
// Scalar reference kernels.
//
// Every 32-element block is decoded to integers q[32] plus float scales by
// formats/block_decode.h, the decoders of the reference dequantization, so
// that both share one decoder per format. Dot products follow the canonical order of quant.h
// literally (this file is compiled with -ffp-contract=off and every fused step is an explicit fma);
// the AVX2 kernels reproduce it bit for bit.

namespace {

using formats::DecodeFiveBits;
using formats::DecodeIQ4;
using formats::DecodeNibbles;
using formats::DecodeQ3K;
using formats::DecodeQ4K;
using formats::DecodeQ5K;
using formats::DecodeQ6K;
using formats::DecodeTwoBits;
using formats::Q6KScale;

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
  formats::DequantizeRow(type, row, out, n);
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
    // LLM_NO_AMX=1 keeps the AVX-512 VNNI products (to compare the two).
    const char* no_amx = std::getenv("LLM_NO_AMX");
    if (CpuHasAvx512Vnni() && (no_amx == nullptr || std::strcmp(no_amx, "1") != 0) &&
        CpuHasAmxInt8()) {
      return KernelSet{"avx512vnni+amx", DequantizeRowAvx2, QuantizeQ8Avx512, DotRowAvx512Vnni,
                       MatMulTileAmx};
    }
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

}  // namespace llm::kernels
