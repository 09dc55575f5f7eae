// Tests of vec.h's Q8_0 KV rows: QuantizeKvQ8 rounds as llama.cpp's
// quantize_row_q8_0 (within half a step, ties to even, the scale in fp16),
// and DotRowsHeads / AxpyRowsHeads over Q8_0 rows give, for every head
// count, row count and head dimension (64, 128, 256 on the AVX-512 kernels;
// 96 on the dequantizing path), exactly the bits of the fp32 overloads over
// the dequantized rows, and double-precision math within rounding.
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "common/half.h"
#include "gtest/gtest.h"
#include "model_svc/kernels/vec.h"

namespace llm::kernels {
namespace {

std::vector<float> RandomFloats(int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

TEST(KvQ8Test, QuantizeIsWithinHalfAStep) {
  std::mt19937 rng(7);
  std::vector<float> x = RandomFloats(256, rng);
  for (int i = 64; i < 96; ++i) x[i] = 0.0f;  // an all-zero block: d = 0, q = 0
  x[100] = 127.0f;                            // d = 1 exactly: x = 126.5 ties to 126
  x[101] = 126.5f;
  x[102] = -3.5f;  // -3.5 ties to -4
  std::vector<KvQ8Block> b(8);
  QuantizeKvQ8(x.data(), b.data(), 256);
  std::vector<float> y(256);
  DequantizeKvQ8(b.data(), y.data(), 256);
  for (int blk = 0; blk < 8; ++blk) {
    float amax = 0;
    for (int l = 0; l < 32; ++l) amax = std::max(amax, std::fabs(x[blk * 32 + l]));
    EXPECT_EQ(b[blk].d, FloatToHalf(amax / 127.0f)) << blk;
    const float d = HalfToFloat(b[blk].d);
    for (int l = 0; l < 32; ++l) {
      const int i = blk * 32 + l;
      EXPECT_LE(std::abs(b[blk].q[l]), 127);
      EXPECT_EQ(y[i], d * b[blk].q[l]);
      // Half a step of the unrounded scale, plus fp16's rounding of d.
      EXPECT_LE(std::fabs(y[i] - x[i]), amax / 127.0f * 0.5f + std::fabs(x[i]) * 1e-3f) << i;
    }
  }
  EXPECT_EQ(b[2].d, 0);
  EXPECT_EQ(b[3].q[100 - 96], 127);
  EXPECT_EQ(b[3].q[101 - 96], 126);
  EXPECT_EQ(b[3].q[102 - 96], -4);
}

class KvQ8RowsTest : public ::testing::TestWithParam<int64_t> {};

TEST_P(KvQ8RowsTest, RowsHeadsAreFp32OverDequantizedRows) {
  const int64_t n = GetParam(), stride = n + 32;  // rows with a gap between them
  for (int g = 1; g <= kMaxRowHeads; ++g) {
    for (const int64_t rows : {1, 3, 5, 16, 17}) {
      std::mt19937 rng(static_cast<uint32_t>(n * 100 + g * 10 + rows));
      const std::vector<float> x = RandomFloats(stride * rows, rng);
      std::vector<KvQ8Block> kq(stride * rows / 32);
      QuantizeKvQ8(x.data(), kq.data(), stride * rows);
      std::vector<float> kf(stride * rows);
      DequantizeKvQ8(kq.data(), kf.data(), stride * rows);
      std::vector<std::vector<float>> q(g), w(g), acc(g), acc_f(g);
      std::vector<std::vector<float>> out(g, std::vector<float>(rows)), out_f = out;
      const float* qp[kMaxRowHeads];
      const float* wp[kMaxRowHeads];
      float *op[kMaxRowHeads], *ofp[kMaxRowHeads], *ap[kMaxRowHeads], *afp[kMaxRowHeads];
      for (int h = 0; h < g; ++h) {
        q[h] = RandomFloats(n, rng);
        w[h] = RandomFloats(rows, rng);
        acc[h] = acc_f[h] = RandomFloats(n, rng);
        qp[h] = q[h].data(), wp[h] = w[h].data();
        op[h] = out[h].data(), ofp[h] = out_f[h].data();
        ap[h] = acc[h].data(), afp[h] = acc_f[h].data();
      }
      const std::vector<std::vector<float>> start = acc;
      DotRowsHeads(qp, g, kq.data(), stride, rows, n, 0.125f, op);
      DotRowsHeads(qp, g, kf.data(), stride, rows, n, 0.125f, ofp);
      AxpyRowsHeads(wp, g, kq.data(), stride, rows, n, ap);
      AxpyRowsHeads(wp, g, kf.data(), stride, rows, n, afp);
      for (int h = 0; h < g; ++h) {
        const std::string where = "g " + std::to_string(g) + ", rows " + std::to_string(rows) +
                                  ", head " + std::to_string(h);
        EXPECT_EQ(out[h], out_f[h]) << where;  // bitwise (no zeros here)
        EXPECT_EQ(acc[h], acc_f[h]) << where;
        for (int64_t r = 0; r < rows; ++r) {
          double dot = 0, mag = 0;
          for (int64_t i = 0; i < n; ++i) {
            dot += double{q[h][i]} * kf[r * stride + i];
            mag += std::fabs(double{q[h][i]} * kf[r * stride + i]);
          }
          EXPECT_NEAR(out[h][r], 0.125 * dot, 0.125 * mag * 1e-6) << where << ", row " << r;
        }
        for (int64_t i = 0; i < n; ++i) {
          double sum = start[h][i], mag = std::fabs(start[h][i]);
          for (int64_t r = 0; r < rows; ++r) {
            sum += double{w[h][r]} * kf[r * stride + i];
            mag += std::fabs(double{w[h][r]} * kf[r * stride + i]);
          }
          EXPECT_NEAR(acc[h][i], sum, mag * 1e-6) << where << ", element " << i;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(HeadDims, KvQ8RowsTest, ::testing::Values(32, 64, 96, 128, 256));

}  // namespace
}  // namespace llm::kernels
