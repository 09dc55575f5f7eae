// Token masks on the logits (core/logits.h, LogitsSpec::mask): every
// encoding of a masked row equals the unmasked row restricted to the
// allowed tokens (float32 bit for bit, -inf elsewhere; top-N allowed ids
// only; log_sum_exp over the allowed ones), and a model whose backend does
// not apply masks (the host fallback, LlamaModel::Forward) gives what one
// that does gives.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "common/half.h"
#include "common/token_mask.h"
#include "common/token_mask_testing.h"
#include "gtest/gtest.h"
#include "model_svc/backend/cpu/cpu_backend.h"
#include "model_svc/core/logits.h"
#include "model_svc/model/llama_model.h"
#include "model_svc/testing/random_model.h"

namespace llm::model {
namespace {

using llm::testing::AllowedByLogit;
using llm::testing::AllowedLogSumExp;
using llm::testing::RandomTokenMask;

constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<float> RandomRow(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 4.0f);
  std::vector<float> row(n);
  for (float& x : row) x = d(rng);
  return row;
}

// Whether `got` is `row` masked by `mask` exactly (float32 bits, -inf).
void ExpectMaskedRow(const std::vector<float>& got, const std::vector<float>& row,
                     const TokenMask& mask) {
  ASSERT_EQ(got.size(), row.size());
  for (size_t i = 0; i < row.size(); ++i) {
    if (mask.allowed(static_cast<int64_t>(i))) {
      ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(row[i])) << "id " << i;
    } else {
      ASSERT_EQ(got[i], -kInf) << "id " << i;
    }
  }
}

void ExpectMaskedEncodings(const std::vector<float>& row, const TokenMask& mask) {
  const double lse = AllowedLogSumExp(row, mask);
  const float tolerance = 1e-5f * std::max(1.0f, std::fabs(static_cast<float>(lse)));
  Logits f32;
  EncodeLogits(row, {.encoding = LogitsEncoding::kFloat32, .mask = &mask}, &f32);
  ExpectMaskedRow(f32.values, row, mask);
  EXPECT_NEAR(f32.log_sum_exp, lse, tolerance);
  EXPECT_EQ(Argmax(f32), AllowedByLogit(row, mask).front());

  Logits f16;
  EncodeLogits(row, {.encoding = LogitsEncoding::kFloat16, .mask = &mask}, &f16);
  ASSERT_EQ(f16.halves.size(), row.size());
  for (size_t i = 0; i < row.size(); ++i) {
    const uint16_t want = mask.allowed(static_cast<int64_t>(i)) ? FloatToHalf(row[i]) : 0xfc00;
    ASSERT_EQ(f16.halves[i], want) << "id " << i;
  }
  EXPECT_NEAR(f16.log_sum_exp, lse, tolerance);

  const std::vector<int32_t> best = AllowedByLogit(row, mask);
  for (int32_t n : {1, 5, 40, static_cast<int32_t>(row.size())}) {
    Logits top;
    EncodeLogits(row, {.encoding = LogitsEncoding::kTopN, .top_n = n, .mask = &mask}, &top);
    const size_t want = std::min<size_t>(n, best.size());  // fewer when fewer are allowed
    ASSERT_EQ(top.top_ids.size(), want) << "top_n " << n;
    ASSERT_EQ(top.top_logits.size(), want);
    for (size_t i = 0; i < want; ++i) {
      EXPECT_EQ(top.top_ids[i], best[i]) << "top_n " << n << " rank " << i;
      EXPECT_EQ(top.top_logits[i], row[best[i]]);
    }
    EXPECT_NEAR(top.log_sum_exp, lse, tolerance);
  }
}

TEST(LogitsMaskTest, EveryEncodingIsTheRowRestrictedToTheAllowedTokens) {
  for (int64_t vocab : {1, 63, 200, 1003, 49152}) {
    const std::vector<float> row = RandomRow(vocab, static_cast<uint32_t>(vocab));
    for (double density : {0.0, 0.002, 0.5, 0.99, 1.0}) {
      SCOPED_TRACE(::testing::Message() << "vocab " << vocab << " density " << density);
      ExpectMaskedEncodings(row, RandomTokenMask(vocab, density, 3));
    }
  }
}

TEST(LogitsMaskTest, ASingleAllowedTokenIsCertain) {
  const std::vector<float> row = RandomRow(1000, 1);
  TokenMask one = TokenMask::AllowNone(1000);
  one.Allow(777);
  Logits top;
  EncodeLogits(row, {.encoding = LogitsEncoding::kTopN, .top_n = 10, .mask = &one}, &top);
  ASSERT_EQ(top.top_ids, std::vector<int32_t>{777});
  EXPECT_EQ(top.log_sum_exp, row[777]);  // probability 1
}

TEST(LogitsMaskTest, InPlaceEqualsTheCopyAndMasksTheRow) {
  const std::vector<float> row = RandomRow(1003, 9);
  const TokenMask mask = RandomTokenMask(1003, 0.3, 9);
  for (LogitsEncoding e :
       {LogitsEncoding::kFloat32, LogitsEncoding::kFloat16, LogitsEncoding::kTopN}) {
    const LogitsSpec spec{.encoding = e, .top_n = 7, .mask = &mask};
    Logits copy, in_place;
    EncodeLogits(row, spec, &copy);
    std::vector<float> scratch = row;
    EncodeLogitsInPlace(scratch, spec, &in_place);
    EXPECT_EQ(copy.values, in_place.values);
    EXPECT_EQ(copy.halves, in_place.halves);
    EXPECT_EQ(copy.top_ids, in_place.top_ids);
    EXPECT_EQ(copy.log_sum_exp, in_place.log_sum_exp);
    ExpectMaskedRow(scratch, row, mask);
  }
}

TEST(LogitsMaskTest, WithoutAMaskNothingChanges) {
  const std::vector<float> row = RandomRow(500, 2);
  const TokenMask all = TokenMask::AllowAll(500);
  for (LogitsEncoding e : {LogitsEncoding::kFloat32, LogitsEncoding::kTopN}) {
    Logits plain, masked;
    EncodeLogits(row, {.encoding = e, .top_n = 20}, &plain);
    EncodeLogits(row, {.encoding = e, .top_n = 20, .mask = &all}, &masked);
    EXPECT_EQ(plain.values, masked.values);
    EXPECT_EQ(plain.top_ids, masked.top_ids);
    EXPECT_EQ(plain.log_sum_exp, masked.log_sum_exp);
  }
}

// The model's forward on the CPU backend, which applies the masks itself
// or (apply_token_masks false) leaves them to the model's host fallback.
std::unique_ptr<LlamaModel> LoadModel(bool backend_applies_masks) {
  testing::RandomModelSpec spec;  // vocab 512
  spec.seed = 5;
  ModelOptions options;
  options.kv_blocks = 8;
  auto file = testing::RandomModelFile(spec);
  EXPECT_TRUE(file.ok()) << file.status();
  auto model = LlamaModel::Load(
      *file, cpu::CreateCpuBackend({.threads = 1, .apply_token_masks = backend_applies_masks}),
      options);
  EXPECT_TRUE(model.ok()) << model.status();
  return *std::move(model);
}

TEST(LogitsMaskTest, TheHostFallbackGivesWhatTheBackendGives) {
  std::vector<Logits> by_backend, by_model, unmasked;
  const TokenMask mask = RandomTokenMask(512, 0.1, 4);
  const std::vector<int32_t> blocks = {0};
  StepBatch batch;
  batch.tokens = {5, 9, 200};
  batch.positions = {0, 1, 2};
  batch.sequences = {SequenceStep{0, 3, 0, blocks}};
  batch.logit_rows = {0, 1, 2};
  // Row 0 unmasked, rows 1 (top-N) and 2 (float32) masked.
  const LogitsSpec specs[] = {{.encoding = LogitsEncoding::kTopN, .top_n = 4},
                              {.encoding = LogitsEncoding::kTopN, .top_n = 4, .mask = &mask},
                              {.encoding = LogitsEncoding::kFloat32, .mask = &mask}};
  const LogitsSpec plain[] = {{.encoding = LogitsEncoding::kFloat32},
                              {.encoding = LogitsEncoding::kFloat32},
                              {.encoding = LogitsEncoding::kFloat32}};
  ASSERT_TRUE(LoadModel(true)->Forward(batch, specs, &by_backend).ok());
  ASSERT_TRUE(LoadModel(false)->Forward(batch, specs, &by_model).ok());
  ASSERT_TRUE(LoadModel(true)->Forward(batch, plain, &unmasked).ok());
  ASSERT_EQ(by_model.size(), 3u);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(by_model[r].encoding, by_backend[r].encoding) << "row " << r;
    EXPECT_EQ(by_model[r].values, by_backend[r].values) << "row " << r;
    EXPECT_EQ(by_model[r].top_ids, by_backend[r].top_ids) << "row " << r;
    EXPECT_EQ(by_model[r].log_sum_exp, by_backend[r].log_sum_exp) << "row " << r;
  }
  ExpectMaskedRow(by_model[2].values, unmasked[2].values, mask);
  for (int32_t id : by_model[1].top_ids) EXPECT_TRUE(mask.allowed(id)) << id;
  const std::vector<int32_t> best = AllowedByLogit(unmasked[1].values, mask);
  EXPECT_EQ(by_model[1].top_ids, std::vector<int32_t>(best.begin(), best.begin() + 4));
}

}  // namespace
}  // namespace llm::model
