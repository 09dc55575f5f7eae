// Tests of vec.h's attention kernels: DotRows and AxpyRows give, for every
// head dimension (the unrolled 64 and 128 and any other), exactly the bits of
// the one-row DotF32F16/DotF32 and AxpyF16/AxpyF32 they batch, and
// RoundThroughF16 rounds as FloatToHalf does; SiluMul is within 1e-6 of
// double precision and gives the scalar formula's bits, its vectorized expf
// libm's.
#include "model_svc/kernels/vec.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/half.h"
#include "gtest/gtest.h"
#include "model_svc/kernels/quant_internal.h"

namespace llm::kernels {
namespace {

constexpr int64_t kRows = 16;

std::vector<float> RandomFloats(int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<uint16_t> ToHalves(const std::vector<float>& v) {
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) h[i] = FloatToHalf(v[i]);
  return h;
}

class VecRowsTest : public ::testing::TestWithParam<int64_t> {};

TEST_P(VecRowsTest, DotRowsIsDotPerRow) {
  const int64_t n = GetParam(), stride = n + 5;
  std::mt19937 rng(n);
  const std::vector<float> q = RandomFloats(n, rng), k = RandomFloats(stride * kRows, rng);
  const std::vector<uint16_t> kh = ToHalves(k);
  const float scale = 0.125f;
  std::vector<float> out(kRows), out_h(kRows);
  DotRows(q.data(), k.data(), stride, kRows, n, scale, out.data());
  DotRows(q.data(), kh.data(), stride, kRows, n, scale, out_h.data());
  for (int64_t r = 0; r < kRows; ++r) {
    EXPECT_EQ(std::bit_cast<uint32_t>(out[r]),
              std::bit_cast<uint32_t>(DotF32(q.data(), k.data() + r * stride, n) * scale))
        << "row " << r;
    EXPECT_EQ(std::bit_cast<uint32_t>(out_h[r]),
              std::bit_cast<uint32_t>(DotF32F16(q.data(), kh.data() + r * stride, n) * scale))
        << "row " << r;
  }
}

TEST_P(VecRowsTest, AxpyRowsIsAxpyPerRowInOrder) {
  const int64_t n = GetParam(), stride = n + 3;
  std::mt19937 rng(n + 1);
  const std::vector<float> w = RandomFloats(kRows, rng), v = RandomFloats(stride * kRows, rng);
  const std::vector<uint16_t> vh = ToHalves(v);
  const std::vector<float> start = RandomFloats(n, rng);
  std::vector<float> acc = start, acc_h = start, want = start, want_h = start;
  AxpyRows(w.data(), v.data(), stride, kRows, n, acc.data());
  AxpyRows(w.data(), vh.data(), stride, kRows, n, acc_h.data());
  for (int64_t r = 0; r < kRows; ++r) {
    AxpyF32(w[r], v.data() + r * stride, want.data(), n);
    AxpyF16(w[r], vh.data() + r * stride, want_h.data(), n);
  }
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(std::bit_cast<uint32_t>(acc[i]), std::bit_cast<uint32_t>(want[i])) << i;
    EXPECT_EQ(std::bit_cast<uint32_t>(acc_h[i]), std::bit_cast<uint32_t>(want_h[i])) << i;
  }
}

// The g heads of a KV head at once: each head's bits are DotRows' and
// AxpyRows' alone, for every head count, row count (odd ones take the
// one-row tail) and head dimension. On an AVX-512 CPU, head dimensions 64
// and 128 run the AVX-512 kernels (rows in fours: 5 and 16 rows take both
// paths) against the AVX2 one-head ones.
TEST_P(VecRowsTest, RowsHeadsAreRowsPerHead) {
  const int64_t n = GetParam(), stride = n + 5;
  for (int g = 1; g <= kMaxRowHeads; ++g) {
    for (const int64_t rows : {1, 2, 5, 16}) {
      std::mt19937 rng(static_cast<uint32_t>(n * 100 + g * 10 + rows));
      const std::vector<float> k = RandomFloats(stride * rows, rng);
      const std::vector<uint16_t> kh = ToHalves(k);
      std::vector<std::vector<float>> q(g), w(g), acc(g), acc_h(g);
      std::vector<std::vector<float>> out(g, std::vector<float>(rows));
      std::vector<std::vector<float>> out_h = out;
      const float* qp[kMaxRowHeads];
      const float* wp[kMaxRowHeads];
      float* op[kMaxRowHeads];
      float* ohp[kMaxRowHeads];
      float* ap[kMaxRowHeads];
      float* ahp[kMaxRowHeads];
      for (int h = 0; h < g; ++h) {
        q[h] = RandomFloats(n, rng);
        w[h] = RandomFloats(rows, rng);
        acc[h] = acc_h[h] = RandomFloats(n, rng);
        qp[h] = q[h].data();
        wp[h] = w[h].data();
        op[h] = out[h].data();
        ohp[h] = out_h[h].data();
        ap[h] = acc[h].data();
        ahp[h] = acc_h[h].data();
      }
      const std::vector<std::vector<float>> start = acc;
      DotRowsHeads(qp, g, k.data(), stride, rows, n, 0.125f, op);
      DotRowsHeads(qp, g, kh.data(), stride, rows, n, 0.125f, ohp);
      AxpyRowsHeads(wp, g, k.data(), stride, rows, n, ap);
      AxpyRowsHeads(wp, g, kh.data(), stride, rows, n, ahp);
      for (int h = 0; h < g; ++h) {
        const std::string where = "g " + std::to_string(g) + ", rows " + std::to_string(rows) +
                                  ", head " + std::to_string(h);
        std::vector<float> want(rows), want_h(rows), want_acc = start[h], want_acc_h = start[h];
        DotRows(q[h].data(), k.data(), stride, rows, n, 0.125f, want.data());
        DotRows(q[h].data(), kh.data(), stride, rows, n, 0.125f, want_h.data());
        AxpyRows(w[h].data(), k.data(), stride, rows, n, want_acc.data());
        AxpyRows(w[h].data(), kh.data(), stride, rows, n, want_acc_h.data());
        // Bitwise: EXPECT_EQ on float vectors compares with ==, which -0 == 0
        // would pass; the values here are never zero.
        EXPECT_EQ(out[h], want) << where;
        EXPECT_EQ(out_h[h], want_h) << where;
        EXPECT_EQ(acc[h], want_acc) << where;
        EXPECT_EQ(acc_h[h], want_acc_h) << where;
      }
    }
  }
}

// A run of rows against many queries, each over its own part of the run
// (empty, whole, either end cut, one row): each score has exactly
// DotRowsHeads' bits for its query and row, over fp32, fp16 and (head
// dimensions that are multiples of 32) Q8_0 rows; scores outside a part are
// never written. On an AVX-512 CPU, 64, 128 and 256 run the transposed
// 16-row kernel (37 rows: two whole groups and a tail).
template <typename T>
void ExpectQueriesAreRowsHeads(const std::vector<T>& k, int64_t stride, int64_t rows, int64_t n,
                               const std::vector<std::vector<float>>& q, const std::string& what) {
  const int nq = static_cast<int>(q.size());
  std::vector<int64_t> begin(nq), end(nq);
  for (int i = 0; i < nq; ++i) {
    const int64_t a = (i * 7) % (rows + 1), b = (i * 13 + 3) % (rows + 1);
    begin[i] = i == 0 ? 0 : std::min(a, b);
    end[i] = i == 0 ? rows : (i == 1 ? begin[i] : std::max(a, b));
  }
  constexpr float kUnwritten = 12345.0f;
  std::vector<std::vector<float>> out(nq, std::vector<float>(rows + 1, kUnwritten));
  std::vector<const float*> qp(nq);
  std::vector<float*> op(nq);
  for (int i = 0; i < nq; ++i) qp[i] = q[i].data(), op[i] = out[i].data();
  DotRowsQueries(qp.data(), nq, k.data(), stride, rows, n, 0.125f, begin.data(), end.data(),
                 op.data());
  for (int i = 0; i < nq; ++i) {
    const int64_t count = end[i] - begin[i];
    std::vector<float> want(rows + 1, kUnwritten);
    if (count > 0) {
      const T* first = std::is_same_v<T, KvQ8Block> ? k.data() + begin[i] * stride / 32
                                                    : k.data() + begin[i] * stride;
      float* o = want.data();
      DotRowsHeads(&qp[i], 1, first, stride, count, n, 0.125f, &o);
    }
    EXPECT_EQ(out[i], want) << what << ", rows " << rows << ", query " << i << " over [" << begin[i]
                            << ", " << end[i] << ")";
  }
}

TEST_P(VecRowsTest, QueriesAreRowsHeads) {
  const int64_t n = GetParam(), stride = n % 32 == 0 ? n + 32 : n + 5;
  for (const int64_t rows : {1, 5, 16, 37}) {
    std::mt19937 rng(static_cast<uint32_t>(n * 100 + rows));
    const std::vector<float> k = RandomFloats(stride * rows, rng);
    std::vector<std::vector<float>> q(11);
    for (std::vector<float>& v : q) v = RandomFloats(n, rng);
    ExpectQueriesAreRowsHeads(k, stride, rows, n, q, "fp32");
    ExpectQueriesAreRowsHeads(ToHalves(k), stride, rows, n, q, "fp16");
    if (n % 32 == 0) {
      std::vector<KvQ8Block> kq(stride * rows / 32);
      QuantizeKvQ8(k.data(), kq.data(), stride * rows);
      ExpectQueriesAreRowsHeads(kq, stride, rows, n, q, "q8_0");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(HeadDims, VecRowsTest, ::testing::Values(7, 32, 64, 80, 128, 256));

// The residual add, RMSNorm's scaling and softmax's: the scalar loops'
// bits, for lengths with and without a tail, and in place.
TEST(VecTest, AddAndScaleMulMatchScalarLoops) {
  std::mt19937 rng(7);
  for (const int64_t n : {1, 7, 8, 13, 576, 1539}) {
    const std::vector<float> x = RandomFloats(n, rng), y = RandomFloats(n, rng);
    const std::vector<float> w = RandomFloats(n, rng);
    const float scale = 0.37f;
    std::vector<float> sum = x, want_sum = x, prod(n), want_prod(n), in_place = x;
    std::vector<float> scaled = x, want_scaled = x;
    ScaleF32(scaled.data(), scale, n);
    for (float& v : want_scaled) v *= scale;
    EXPECT_EQ(scaled, want_scaled) << n;
    AddF32(sum.data(), y.data(), n);
    ScaleMulF32(x.data(), scale, w.data(), prod.data(), n);
    ScaleMulF32(in_place.data(), scale, w.data(), in_place.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      want_sum[i] += y[i];
      want_prod[i] = x[i] * scale * w[i];
    }
    EXPECT_EQ(sum, want_sum) << n;
    EXPECT_EQ(prod, want_prod) << n;
    EXPECT_EQ(in_place, want_prod) << n;
  }
}

// RoPE's rotation: the scalar loop's bits (each product rounded before the
// add), whole vectors and a tail.
TEST(VecTest, RotatePairsMatchesScalarLoop) {
  std::mt19937 rng(8);
  for (const int64_t pairs : {1, 3, 4, 32, 39}) {
    const std::vector<float> v = RandomFloats(2 * pairs, rng);
    std::vector<float> cs(2 * pairs);
    for (int64_t i = 0; i < pairs; ++i) {
      const float angle = static_cast<float>(i) * 0.731f + 0.2f;
      cs[2 * i] = std::cos(angle);
      cs[2 * i + 1] = std::sin(angle);
    }
    std::vector<float> got = v, want = v;
    RotatePairs(got.data(), cs.data(), pairs);
    for (int64_t i = 0; i < pairs; ++i) {
      const volatile float ac = v[2 * i] * cs[2 * i], bs = v[2 * i + 1] * cs[2 * i + 1];
      const volatile float as = v[2 * i] * cs[2 * i + 1], bc = v[2 * i + 1] * cs[2 * i];
      want[2 * i] = ac - bs;
      want[2 * i + 1] = as + bc;
    }
    EXPECT_EQ(got, want) << pairs;
  }
}

TEST(VecTest, RoundThroughF16RoundsLikeFloatToHalf) {
  std::mt19937 rng(7);
  std::vector<float> x = RandomFloats(1000, rng);
  for (float& v : x) v *= 1000.0f;
  // Ties, subnormal halves, overflow and the limits.
  x.insert(x.end(), {1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 3e-6f, -6e-8f, 1e-9f, 65504.0f, 65520.0f,
                     1e6f, -std::numeric_limits<float>::infinity(), 0.0f, -0.0f});
  std::vector<float> out(x.size());
  RoundThroughF16(x.data(), out.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(std::bit_cast<uint32_t>(out[i]),
              std::bit_cast<uint32_t>(HalfToFloat(FloatToHalf(x[i]))))
        << x[i];
  }
}

TEST(VecTest, SiluMulMatchesDoublePrecision) {
  std::mt19937 rng(11);
  std::vector<float> gate = RandomFloats(4099, rng), up = RandomFloats(4099, rng);
  for (float& g : gate) g *= 8.0f;
  // Large magnitudes, where exp under- or overflows, and zero.
  gate.insert(gate.end(), {-100.0f, -88.0f, -30.0f, 0.0f, -0.0f, 30.0f, 88.0f, 100.0f, 1e-8f});
  up.resize(gate.size(), 1.5f);
  std::vector<float> out(gate.size());
  SiluMul(gate.data(), up.data(), out.data(), static_cast<int64_t>(gate.size()));
  for (size_t i = 0; i < gate.size(); ++i) {
    const double g = gate[i];
    const double want = g / (1.0 + std::exp(-g)) * up[i];
    EXPECT_NEAR(out[i], want, 1e-6 * std::abs(want) + 1e-30) << "gate " << gate[i];
  }
  // And bit for bit the scalar formula with libm's expf.
  for (size_t i = 0; i < gate.size(); ++i) {
    const float want = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
    EXPECT_EQ(std::bit_cast<uint32_t>(out[i]), std::bit_cast<uint32_t>(want)) << gate[i];
  }
  // In place.
  std::vector<float> in_place = gate;
  SiluMul(in_place.data(), up.data(), in_place.data(), static_cast<int64_t>(gate.size()));
  EXPECT_EQ(in_place, out);
}

// FirstAbove finds the first element strictly above the threshold, as a
// loop does: on random rows with NaNs, at every length around the SIMD
// blocks, for thresholds inside and outside the values and NaN.
TEST(VecTest, FirstAboveMatchesALoop) {
  std::mt19937 rng(17);
  std::uniform_int_distribution<int> level(-20, 20);
  for (int64_t n = 0; n < 70; ++n) {
    std::vector<float> x(n);
    for (float& v : x) v = level(rng) == 0 ? NAN : level(rng) * 0.25f;
    for (const float t : {-100.0f, -1.0f, 0.0f, 2.0f, 4.75f, 5.0f, 100.0f, NAN}) {
      int64_t want = 0;
      while (want < n && !(x[want] > t)) ++want;
      EXPECT_EQ(FirstAbove(x.data(), n, t), want) << "n " << n << ", threshold " << t;
      if (internal::CpuHasAvx2Fma()) {
        EXPECT_EQ(vec_internal::FirstAboveAvx2(x.data(), n, t), want) << n << " " << t;
      }
    }
  }
}

// MaskF32 keeps the elements whose bit is set and puts -inf elsewhere, in
// every version, at every length around the SIMD blocks, with whole words
// set, clear and mixed, and in place.
TEST(VecTest, MaskF32KeepsTheSetBits) {
  std::mt19937 rng(23);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  using Mask = void (*)(const float*, const uint64_t*, float*, int64_t);
  std::vector<std::pair<const char*, Mask>> versions = {{"dispatch", MaskF32}};
  if (internal::CpuHasAvx2Fma()) versions.push_back({"avx2", vec_internal::MaskF32Avx2});
  if (internal::CpuHasAvx512Vnni()) versions.push_back({"avx512", vec_internal::MaskF32Avx512});
  for (int64_t n = 0; n < 200; n += (n < 70 ? 1 : 13)) {
    std::vector<float> x(n);
    for (float& v : x) v = normal(rng);
    std::vector<uint64_t> bits((n + 63) / 64 + 1);
    for (size_t w = 0; w < bits.size(); ++w) {
      bits[w] = w % 3 == 0 ? ~uint64_t{0} : w % 3 == 1 ? 0 : (uint64_t{rng()} << 32 | rng());
    }
    for (const auto& [name, mask] : versions) {
      std::vector<float> out(n, 7.0f), in_place = x;
      mask(x.data(), bits.data(), out.data(), n);
      mask(in_place.data(), bits.data(), in_place.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        const bool keep = ((bits[i / 64] >> (i % 64)) & 1) != 0;
        ASSERT_EQ(out[i], keep ? x[i] : -INFINITY) << name << " n " << n << " i " << i;
        ASSERT_EQ(in_place[i], out[i]) << name << " in place, n " << n << " i " << i;
      }
    }
  }
}

// The vectorized expf (AVX2, and AVX-512 where the CPU has it) gives
// std::exp's bits: on a stride through every float (1 in 61; the whole range
// was checked once, 2^31 inputs with |x| < 88, and the AVX-512 version
// against the AVX2 one on all 2^32), and at the edges, where it hands lanes
// to std::exp.
TEST(VecTest, ExpLibmMatchesStdExp) {
  if (!internal::CpuHasAvx2Fma()) GTEST_SKIP() << "no AVX2+FMA on this CPU";
  using Exp = void (*)(const float*, float*, int64_t);
  std::vector<std::pair<const char*, Exp>> versions = {{"avx2", vec_internal::ExpLibmAvx2}};
  if (internal::CpuHasAvx512Vnni()) versions.push_back({"avx512", vec_internal::ExpLibmAvx512});
  for (const auto& [name, exp] : versions) {
    SCOPED_TRACE(name);
    int64_t checked = 0, mismatches = 0;
    auto check = [&](const std::vector<float>& x) {
      std::vector<float> out(x.size());
      exp(x.data(), out.data(), static_cast<int64_t>(x.size()));
      for (size_t i = 0; i < x.size(); ++i) {
        const float want = std::exp(x[i]);
        const bool same = std::isnan(want)
                              ? std::isnan(out[i])
                              : std::bit_cast<uint32_t>(out[i]) == std::bit_cast<uint32_t>(want);
        if (!same && ++mismatches <= 5) {
          ADD_FAILURE() << "exp(" << x[i] << "): " << out[i] << " != " << want;
        }
      }
      checked += static_cast<int64_t>(x.size());
    };
    // Every 61st bit pattern, a million at a time.
    std::vector<float> x;
    for (uint64_t u = 0; u <= 0xFFFFFFFFu; u += 61) {
      x.push_back(std::bit_cast<float>(static_cast<uint32_t>(u)));
      if (x.size() == (1 << 20)) check(std::exchange(x, {}));
    }
    x.insert(x.end(),
             {88.0f, -88.0f, 0x1.62e42ep6f, 0x1.62e430p6f, -0x1.9fe368p6f, -104.0f, -87.9f, 87.9f,
              0.0f, -0.0f, 1e-30f, -1e-30f, std::numeric_limits<float>::infinity(),
              -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()});
    while (x.size() % 8 != 3) x.push_back(1.0f);  // and a scalar tail
    check(x);
    EXPECT_EQ(mismatches, 0) << "of " << checked;
  }
}

// The log-sum-exp's sum: AVX-512 gives AVX2's bits, for lengths with a
// partial last block of 4096, an 8-element step and a scalar tail.
TEST(VecTest, SumExpAvx512MatchesAvx2) {
  if (!internal::CpuHasAvx512Vnni()) GTEST_SKIP() << "no AVX-512 on this CPU";
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> logit(-30.0f, 12.0f);
  for (const int64_t n : {5, 8, 16, 24, 29, 4096, 4104, 49152, 49155}) {
    std::vector<float> x(n);
    for (float& v : x) v = logit(rng);
    x[n / 2] = -200.0f;  // underflows to 0
    const float shift = 12.5f;
    EXPECT_EQ(std::bit_cast<uint64_t>(vec_internal::SumExpF32Avx512(x.data(), n, shift)),
              std::bit_cast<uint64_t>(vec_internal::SumExpF32Avx2(x.data(), n, shift)))
        << n;
  }
}

// SiLU's AVX-512 version gives the AVX2 version's bits (and so the scalar
// loop's): every 61st float as the gate, against random up values, a
// million at a time.
TEST(VecTest, SiluMulAvx512MatchesAvx2) {
  if (!internal::CpuHasAvx512Vnni()) GTEST_SKIP() << "no AVX-512 on this CPU";
  std::mt19937 rng(13);
  int64_t checked = 0, mismatches = 0;
  auto check = [&](const std::vector<float>& gate) {
    const std::vector<float> up = RandomFloats(static_cast<int64_t>(gate.size()), rng);
    const int64_t n = static_cast<int64_t>(gate.size());
    std::vector<float> a(gate.size()), b(gate.size());
    vec_internal::SiluMulAvx2(gate.data(), up.data(), a.data(), n);
    vec_internal::SiluMulAvx512(gate.data(), up.data(), b.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const bool same = std::isnan(a[i])
                            ? std::isnan(b[i])
                            : std::bit_cast<uint32_t>(a[i]) == std::bit_cast<uint32_t>(b[i]);
      if (!same && ++mismatches <= 5) {
        ADD_FAILURE() << "gate " << gate[i] << ": " << b[i] << " != " << a[i];
      }
    }
    checked += n;
  };
  std::vector<float> gate;
  for (uint64_t u = 0; u <= 0xFFFFFFFFu; u += 61) {
    gate.push_back(std::bit_cast<float>(static_cast<uint32_t>(u)));
    if (gate.size() == (1 << 20)) check(std::exchange(gate, {}));
  }
  gate.push_back(2.0f);  // and a scalar tail
  while (gate.size() % 8 != 3) gate.push_back(-2.0f);
  check(gate);
  EXPECT_EQ(mismatches, 0) << "of " << checked;
}

}  // namespace
}  // namespace llm::kernels
