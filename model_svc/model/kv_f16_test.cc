// The fp16 KV cache (the server's default): close to the fp64 reference, and
// as self-consistent as the fp32 cache (prefill then decode equals one
// prefill).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "gtest/gtest.h"
#include "model_svc/model/llama_model.h"
#include "model_svc/testing/random_model.h"
#include "model_svc/testing/reference_forward.h"

namespace llm::model {
namespace {

using testing::LoadRandomModel;
using testing::RandomModelSpec;

RandomModelSpec Spec() {
  RandomModelSpec s;
  s.vocab = 256;
  s.d_model = 128;
  s.layers = 2;
  s.heads = 4;
  s.kv_heads = 2;
  s.ff = 256;
  s.seed = 11;
  return s;  // F32 weights: no activation rounding, so the cache's is all there is
}

std::vector<int32_t> Tokens(int n) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = (i * 37 + 11) % 256;
  return t;
}

// Logits of rows [0, n) of one sequence appended from position `start`.
std::vector<std::vector<float>> RunSteps(LlamaModel& m, std::span<const int32_t> tokens,
                                         int64_t start, const std::vector<int32_t>& blocks) {
  StepBatch b;
  b.tokens.assign(tokens.begin(), tokens.end());
  for (size_t i = 0; i < tokens.size(); ++i) {
    b.positions.push_back(static_cast<int32_t>(start + i));
    b.logit_rows.push_back(static_cast<int64_t>(i));
  }
  b.sequences.push_back({0, static_cast<int64_t>(tokens.size()), start, blocks});
  std::vector<LogitsSpec> specs(tokens.size());
  std::vector<Logits> out;
  EXPECT_TRUE(m.Forward(b, specs, &out).ok());
  std::vector<std::vector<float>> rows;
  for (Logits& l : out) rows.push_back(std::move(l.values));
  return rows;
}

double NormalizedError(const std::vector<std::vector<float>>& a,
                       const std::vector<std::vector<float>>& b) {
  double diff = 0, scale = 0;
  for (size_t r = 0; r < b.size(); ++r) {
    for (size_t i = 0; i < b[r].size(); ++i) {
      diff = std::max(diff, std::abs(double{a[r][i]} - b[r][i]));
      scale = std::max(scale, std::abs(double{b[r][i]}));
    }
  }
  return diff / scale;
}

std::unique_ptr<LlamaModel> Load(KvType type) {
  ModelOptions options;
  options.max_step_tokens = 64;
  options.max_logit_rows = 64;
  options.kv_blocks = 8;
  options.kv_block_size = 16;
  options.kv_type = type;
  auto m = LoadRandomModel(Spec(), options, 2);
  EXPECT_TRUE(m.ok()) << m.status();
  return *std::move(m);
}

TEST(KvF16Test, CloseToTheReference) {
  auto file = testing::RandomModelFile(Spec());
  ASSERT_TRUE(file.ok());
  const std::vector<int32_t> tokens = Tokens(40);
  const auto ref = testing::ReferenceLogits(**file, tokens);
  const std::vector<int32_t> blocks = {3, 0, 5};
  auto f32 = Load(KvType::kF32);
  auto f16 = Load(KvType::kF16);
  const double err32 = NormalizedError(RunSteps(*f32, tokens, 0, blocks), ref);
  const double err16 = NormalizedError(RunSteps(*f16, tokens, 0, blocks), ref);
  // fp16 keeps 11 significant bits: ~5e-4 relative per element.
  EXPECT_LT(err32, 1e-4);
  EXPECT_LT(err16, 5e-3);
  EXPECT_GT(err16, err32);  // the cache really is fp16
}

TEST(KvF16Test, PrefillThenDecodeEqualsOnePrefill) {
  auto m = Load(KvType::kF16);
  const std::vector<int32_t> tokens = Tokens(30);
  const std::vector<int32_t> blocks = {1, 2};
  const auto whole = RunSteps(*m, tokens, 0, blocks);
  RunSteps(*m, std::span(tokens).first(12), 0, blocks);
  for (int i = 12; i < 30; ++i) {
    const auto step = RunSteps(*m, std::span(tokens).subspan(i, 1), i, blocks);
    EXPECT_LT(NormalizedError(step, {whole[i]}), 1e-5) << "position " << i;
  }
}

}  // namespace
}  // namespace llm::model
