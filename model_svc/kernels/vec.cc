#include "model_svc/kernels/vec.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/half.h"
#include "model_svc/kernels/quant_internal.h"

namespace llm::kernels {
namespace {

bool HasAvx2() {
  static const bool has = internal::CpuHasAvx2Fma();  // AVX2, FMA and F16C
  return has;
}

bool HasAvx512() {
  static const bool has = internal::CpuHasAvx512Vnni();
  return has;
}

// Eight partial sums, like the SIMD version, so both round alike.
template <typename Load>
float DotLoop(const float* a, int64_t n, Load b) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * b(i + j);
  }
  float sum = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < n; ++i) sum += a[i] * b(i);
  return sum;
}

}  // namespace

float DotF32(const float* a, const float* b, int64_t n) {
  if (HasAvx2()) return vec_internal::DotF32Avx2(a, b, n);
  return DotLoop(a, n, [b](int64_t i) { return b[i]; });
}

float DotF32F16(const float* a, const uint16_t* b, int64_t n) {
  if (HasAvx2()) return vec_internal::DotF32F16Avx2(a, b, n);
  return DotLoop(a, n, [b](int64_t i) { return HalfToFloat(b[i]); });
}

void AddF32(float* x, const float* y, int64_t n) {
  if (HasAvx2()) return vec_internal::AddF32Avx2(x, y, n);
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

void ScaleMulF32(const float* x, float scale, const float* w, float* out, int64_t n) {
  if (HasAvx2()) return vec_internal::ScaleMulF32Avx2(x, scale, w, out, n);
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale * w[i];
}

void RotatePairs(float* v, const float* cs, int64_t pairs) {
  if (HasAvx2()) return vec_internal::RotatePairsAvx2(v, cs, pairs);
  for (int64_t i = 0; i < pairs; ++i) {
    const float c = cs[2 * i], s = cs[2 * i + 1];
    const float a = v[2 * i], b = v[2 * i + 1];
    v[2 * i] = a * c - b * s;
    v[2 * i + 1] = a * s + b * c;
  }
}

void AxpyF32(float w, const float* b, float* out, int64_t n) {
  if (HasAvx2()) return vec_internal::AxpyF32Avx2(w, b, out, n);
  for (int64_t i = 0; i < n; ++i) out[i] += w * b[i];
}

void AxpyF16(float w, const uint16_t* b, float* out, int64_t n) {
  if (HasAvx2()) return vec_internal::AxpyF16Avx2(w, b, out, n);
  for (int64_t i = 0; i < n; ++i) out[i] += w * HalfToFloat(b[i]);
}

void F32ToF16(const float* x, uint16_t* out, int64_t n) {
  if (HasAvx2()) return vec_internal::F32ToF16Avx2(x, out, n);
  for (int64_t i = 0; i < n; ++i) out[i] = FloatToHalf(x[i]);
}

float MaxF32(const float* x, int64_t n) {
  if (HasAvx2()) return vec_internal::MaxF32Avx2(x, n);
  float m = -INFINITY;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(x[i])) return x[i];
    m = std::max(m, x[i]);
  }
  return m;
}

int64_t FirstAbove(const float* x, int64_t n, float threshold) {
  if (HasAvx2()) return vec_internal::FirstAboveAvx2(x, n, threshold);
  int64_t i = 0;
  while (i < n && !(x[i] > threshold)) ++i;
  return i;
}

double SumExpF32(const float* x, int64_t n, float shift) {
  if (HasAvx512()) return vec_internal::SumExpF32Avx512(x, n, shift);
  if (HasAvx2()) return vec_internal::SumExpF32Avx2(x, n, shift);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(x[i] - shift);
  return sum;
}

void MaskF32(const float* x, const uint64_t* bits, float* out, int64_t n) {
  if (HasAvx512()) return vec_internal::MaskF32Avx512(x, bits, out, n);
  if (HasAvx2()) return vec_internal::MaskF32Avx2(x, bits, out, n);
  for (int64_t i = 0; i < n; ++i) {
    out[i] = ((bits[i >> 6] >> (i & 63)) & 1) != 0 ? x[i] : -INFINITY;
  }
}

void DotRows(const float* q, const uint16_t* k, int64_t stride, int64_t rows, int64_t n,
             float scale, float* out) {
  if (HasAvx2()) return vec_internal::DotRowsAvx2(q, k, stride, rows, n, scale, out);
  for (int64_t r = 0; r < rows; ++r) out[r] = DotF32F16(q, k + r * stride, n) * scale;
}

void DotRows(const float* q, const float* k, int64_t stride, int64_t rows, int64_t n, float scale,
             float* out) {
  if (HasAvx2()) return vec_internal::DotRowsAvx2(q, k, stride, rows, n, scale, out);
  for (int64_t r = 0; r < rows; ++r) out[r] = DotF32(q, k + r * stride, n) * scale;
}

void AxpyRows(const float* w, const uint16_t* v, int64_t stride, int64_t rows, int64_t n,
              float* acc) {
  if (HasAvx2()) return vec_internal::AxpyRowsAvx2(w, v, stride, rows, n, acc);
  for (int64_t r = 0; r < rows; ++r) AxpyF16(w[r], v + r * stride, acc, n);
}

void AxpyRows(const float* w, const float* v, int64_t stride, int64_t rows, int64_t n, float* acc) {
  if (HasAvx2()) return vec_internal::AxpyRowsAvx2(w, v, stride, rows, n, acc);
  for (int64_t r = 0; r < rows; ++r) AxpyF32(w[r], v + r * stride, acc, n);
}

void DotRowsHeads(const float* const* q, int g, const uint16_t* k, int64_t stride, int64_t rows,
                  int64_t n, float scale, float* const* out) {
  if (HasAvx512() && vec_internal::DotRowsHeadsAvx512(q, g, k, stride, rows, n, scale, out)) return;
  if (HasAvx2()) return vec_internal::DotRowsHeadsAvx2(q, g, k, stride, rows, n, scale, out);
  for (int h = 0; h < g; ++h) DotRows(q[h], k, stride, rows, n, scale, out[h]);
}

void DotRowsHeads(const float* const* q, int g, const float* k, int64_t stride, int64_t rows,
                  int64_t n, float scale, float* const* out) {
  if (HasAvx512() && vec_internal::DotRowsHeadsAvx512(q, g, k, stride, rows, n, scale, out)) return;
  if (HasAvx2()) return vec_internal::DotRowsHeadsAvx2(q, g, k, stride, rows, n, scale, out);
  for (int h = 0; h < g; ++h) DotRows(q[h], k, stride, rows, n, scale, out[h]);
}

namespace {
// The row that starts `e` elements into k (of Q8_0 rows, e a multiple of 32).
template <typename T>
const T* ElementsInto(const T* k, int64_t e) {
  return k + e;
}
const KvQ8Block* ElementsInto(const KvQ8Block* k, int64_t e) { return k + e / 32; }

// DotRowsQueries: the AVX-512 kernel, or else DotRowsHeads query by query.
template <typename T>
void DotRowsQueriesOf(const float* const* q, int nq, const T* k, int64_t stride, int64_t rows,
                      int64_t n, float scale, const int64_t* begin, const int64_t* end,
                      float* const* out) {
  if (HasAvx512() &&
      vec_internal::DotRowsQueriesAvx512(q, nq, k, stride, rows, n, scale, begin, end, out)) {
    return;
  }
  for (int i = 0; i < nq; ++i) {
    if (begin[i] < end[i]) {
      DotRowsHeads(&q[i], 1, ElementsInto(k, begin[i] * stride), stride, end[i] - begin[i], n,
                   scale, &out[i]);
    }
  }
}
}  // namespace

void DotRowsQueries(const float* const* q, int nq, const uint16_t* k, int64_t stride, int64_t rows,
                    int64_t n, float scale, const int64_t* begin, const int64_t* end,
                    float* const* out) {
  DotRowsQueriesOf(q, nq, k, stride, rows, n, scale, begin, end, out);
}
void DotRowsQueries(const float* const* q, int nq, const float* k, int64_t stride, int64_t rows,
                    int64_t n, float scale, const int64_t* begin, const int64_t* end,
                    float* const* out) {
  DotRowsQueriesOf(q, nq, k, stride, rows, n, scale, begin, end, out);
}
void DotRowsQueries(const float* const* q, int nq, const KvQ8Block* k, int64_t stride, int64_t rows,
                    int64_t n, float scale, const int64_t* begin, const int64_t* end,
                    float* const* out) {
  DotRowsQueriesOf(q, nq, k, stride, rows, n, scale, begin, end, out);
}

void AxpyRowsHeads(const float* const* w, int g, const uint16_t* v, int64_t stride, int64_t rows,
                   int64_t n, float* const* acc) {
  if (HasAvx512() && vec_internal::AxpyRowsHeadsAvx512(w, g, v, stride, rows, n, acc)) return;
  if (HasAvx2()) return vec_internal::AxpyRowsHeadsAvx2(w, g, v, stride, rows, n, acc);
  for (int h = 0; h < g; ++h) AxpyRows(w[h], v, stride, rows, n, acc[h]);
}

void AxpyRowsHeads(const float* const* w, int g, const float* v, int64_t stride, int64_t rows,
                   int64_t n, float* const* acc) {
  if (HasAvx512() && vec_internal::AxpyRowsHeadsAvx512(w, g, v, stride, rows, n, acc)) return;
  if (HasAvx2()) return vec_internal::AxpyRowsHeadsAvx2(w, g, v, stride, rows, n, acc);
  for (int h = 0; h < g; ++h) AxpyRows(w[h], v, stride, rows, n, acc[h]);
}

void QuantizeKvQ8(const float* x, KvQ8Block* out, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b, x += 32) {
    float amax = 0.0f;
    for (int l = 0; l < 32; ++l) amax = std::max(amax, std::fabs(x[l]));
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    out[b].d = FloatToHalf(amax / 127.0f);
    for (int l = 0; l < 32; ++l) {
      // |x * id| <= 127 (up to rounding of id: clamped); half to even.
      const float v = std::fmin(std::fmax(x[l] * id, -127.0f), 127.0f);
      out[b].q[l] = static_cast<int8_t>(std::nearbyint(v));
    }
  }
}

void DequantizeKvQ8(const KvQ8Block* x, float* out, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b, out += 32) {
    const float d = HalfToFloat(x[b].d);
    for (int l = 0; l < 32; ++l) out[l] = d * static_cast<float>(x[b].q[l]);
  }
}

namespace {

// Rows [r0, r0 + count) of Q8_0 rows `stride` elements apart, dequantized
// into buf as rows of n floats, in turns of at most kBufferFloats / n rows:
// f(buf, first row, rows) for each turn.
template <typename F>
void InDequantizedTurns(const KvQ8Block* x, int64_t stride, int64_t rows, int64_t n, F f) {
  constexpr int64_t kBufferFloats = 4096;
  float stack[kBufferFloats];
  std::vector<float> heap;
  float* buf = stack;
  if (n > kBufferFloats) {
    heap.resize(n);
    buf = heap.data();
  }
  const int64_t turn = std::max<int64_t>(1, kBufferFloats / n);
  for (int64_t r0 = 0; r0 < rows; r0 += turn) {
    const int64_t count = std::min(turn, rows - r0);
    for (int64_t r = 0; r < count; ++r) {
      DequantizeKvQ8(x + (r0 + r) * stride / 32, buf + r * n, n);
    }
    f(buf, r0, count);
  }
}

}  // namespace

void DotRowsHeads(const float* const* q, int g, const KvQ8Block* k, int64_t stride, int64_t rows,
                  int64_t n, float scale, float* const* out) {
  if (HasAvx512() && vec_internal::DotRowsHeadsAvx512(q, g, k, stride, rows, n, scale, out)) return;
  InDequantizedTurns(k, stride, rows, n, [&](const float* buf, int64_t r0, int64_t count) {
    float* o[kMaxRowHeads];
    for (int h = 0; h < g; ++h) o[h] = out[h] + r0;
    DotRowsHeads(q, g, buf, n, count, n, scale, o);
  });
}

void AxpyRowsHeads(const float* const* w, int g, const KvQ8Block* v, int64_t stride, int64_t rows,
                   int64_t n, float* const* acc) {
  if (HasAvx512() && vec_internal::AxpyRowsHeadsAvx512(w, g, v, stride, rows, n, acc)) return;
  InDequantizedTurns(v, stride, rows, n, [&](const float* buf, int64_t r0, int64_t count) {
    const float* wr[kMaxRowHeads];
    for (int h = 0; h < g; ++h) wr[h] = w[h] + r0;
    AxpyRowsHeads(wr, g, buf, n, count, n, acc);
  });
}

void SiluMul(const float* gate, const float* up, float* out, int64_t n) {
  if (HasAvx512()) return vec_internal::SiluMulAvx512(gate, up, out, n);
  if (HasAvx2()) return vec_internal::SiluMulAvx2(gate, up, out, n);
  for (int64_t i = 0; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void RotateHalves(float* v, const float* cs, int64_t pairs) {
  for (int64_t i = 0; i < pairs; ++i) {
    const float c = cs[2 * i], s = cs[2 * i + 1];
    const float a = v[i], b = v[i + pairs];
    // Each product rounded: this file is built with -ffp-contract=off.
    v[i] = a * c - b * s;
    v[i + pairs] = a * s + b * c;
  }
}

void ScaleF32(float* x, float s, int64_t n) {
  if (HasAvx512()) return vec_internal::ScaleF32Avx512(x, s, n);
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

namespace {

// gelu(float(h)) rounded to fp16, for every fp16 bit pattern h.
const uint16_t* GeluTable() {
  static const uint16_t* table = [] {
    static uint16_t t[1 << 16];
    constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
    constexpr float kCoefA = 0.044715f;
    for (uint32_t h = 0; h < (1u << 16); ++h) {
      const float g = HalfToFloat(static_cast<uint16_t>(h));
      t[h] = FloatToHalf(0.5f * g * (1.0f + std::tanh(kSqrt2OverPi * g * (1.0f + kCoefA * g * g))));
    }
    return t;
  }();
  return table;
}

}  // namespace

void GeluMul(const float* gate, const float* up, float* out, int64_t n) {
  const uint16_t* table = GeluTable();
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    if (g <= -10.0f) {
      out[i] = 0.0f;
    } else if (g >= 10.0f) {
      out[i] = g * up[i];
    } else {
      out[i] = HalfToFloat(table[FloatToHalf(g)]) * up[i];
    }
  }
}

void RoundThroughF16(const float* x, float* out, int64_t n) {
  if (HasAvx2()) return vec_internal::RoundThroughF16Avx2(x, out, n);
  for (int64_t i = 0; i < n; ++i) out[i] = HalfToFloat(FloatToHalf(x[i]));
}

double ExpInPlace(float* x, int64_t n, float shift) {
  if (HasAvx2()) return vec_internal::ExpInPlaceAvx2(x, n, shift);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - shift);
    sum += x[i];
  }
  return sum;
}

}  // namespace llm::kernels
