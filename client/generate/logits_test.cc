#include "client/generate/logits.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace llm::client {
namespace {

TEST(LogitsTest, ParsesModes) {
  EXPECT_EQ(ParseLogitsMode("auto")->kind, LogitsMode::Kind::kAuto);
  EXPECT_EQ(ParseLogitsMode("full")->kind, LogitsMode::Kind::kFloat32);
  EXPECT_EQ(ParseLogitsMode("fp16")->kind, LogitsMode::Kind::kFloat16);
  auto n = ParseLogitsMode("top-n:40");
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n->kind, LogitsMode::Kind::kTopN);
  EXPECT_EQ(n->top_n, 40);
  EXPECT_EQ(LogitsModeName(*n), "top-n:40");
  for (const char* bad : {"top-n:0", "top-n:", "top-n:x", "top-n:-3", "half", "top-n:5x"}) {
    EXPECT_FALSE(ParseLogitsMode(bad).ok()) << bad;
  }
}

TEST(LogitsTest, AutoPicksTheCheapestExactEncoding) {
  sampler::SamplingParams greedy;
  greedy.temperature = 0;
  v1::LogitsOptions o = ChooseLogitsOptions({}, greedy, 49152);
  EXPECT_EQ(o.encoding(), v1::LogitsOptions::LOGITS_TOP_N);
  EXPECT_EQ(o.top_n(), 1u);

  sampler::SamplingParams top_k;
  top_k.temperature = 0.8f;
  top_k.top_k = 40;
  top_k.top_p = 0.95f;
  o = ChooseLogitsOptions({}, top_k, 49152);
  EXPECT_EQ(o.encoding(), v1::LogitsOptions::LOGITS_TOP_N);
  EXPECT_EQ(o.top_n(), 40u);
  EXPECT_TRUE(sampler::IsExactForTopN(top_k, o.top_n()));

  sampler::SamplingParams top_p_only;  // no top-k: no N is always exact
  top_p_only.top_p = 0.9f;
  EXPECT_EQ(ChooseLogitsOptions({}, top_p_only, 49152).encoding(),
            v1::LogitsOptions::LOGITS_FLOAT32);

  // A k so large that full logits are smaller on the wire.
  sampler::SamplingParams big_k;
  big_k.top_k = 30000;
  EXPECT_EQ(ChooseLogitsOptions({}, big_k, 49152).encoding(), v1::LogitsOptions::LOGITS_FLOAT32);
}

TEST(LogitsTest, ExplicitModesWin) {
  sampler::SamplingParams greedy;
  greedy.temperature = 0;
  EXPECT_EQ(ChooseLogitsOptions({LogitsMode::Kind::kFloat16, 0}, greedy, 100).encoding(),
            v1::LogitsOptions::LOGITS_FLOAT16);
  v1::LogitsOptions o = ChooseLogitsOptions({LogitsMode::Kind::kTopN, 500}, greedy, 100);
  EXPECT_EQ(o.encoding(), v1::LogitsOptions::LOGITS_TOP_N);
  EXPECT_EQ(o.top_n(), 100u);  // capped to the vocabulary
}

TEST(LogitsTest, DecodesEveryEncoding) {
  DecodedLogits d;
  v1::Logits full;
  full.set_encoding(v1::LogitsOptions::LOGITS_FLOAT32);
  const float values[3] = {1.5f, -2.0f, 0.25f};
  full.set_float32(std::string(reinterpret_cast<const char*>(values), sizeof(values)));
  ASSERT_TRUE(d.Decode(full, 3).ok());
  EXPECT_FALSE(d.input().is_top_n());
  EXPECT_EQ(d.input().logits()[2], 0.25f);
  EXPECT_FALSE(d.Decode(full, 4).ok());  // wrong size

  v1::Logits half;
  half.set_encoding(v1::LogitsOptions::LOGITS_FLOAT16);
  const uint16_t halves[2] = {0x3C00, 0xC000};
  half.set_float16(std::string(reinterpret_cast<const char*>(halves), sizeof(halves)));
  ASSERT_TRUE(d.Decode(half, 2).ok());
  EXPECT_EQ(d.input().logits()[1], -2.0f);

  v1::Logits top;
  top.set_encoding(v1::LogitsOptions::LOGITS_TOP_N);
  top.add_top_ids(7);
  top.add_top_logits(3.0f);
  top.set_log_sum_exp(4.0f);
  ASSERT_TRUE(d.Decode(top, 10).ok());
  EXPECT_TRUE(d.input().is_top_n());
  EXPECT_EQ(d.input().ids()[0], 7);
  EXPECT_EQ(d.input().log_sum_exp(), 4.0f);
  top.add_top_ids(8);  // ids and logits of different lengths
  EXPECT_FALSE(d.Decode(top, 10).ok());
}

// Under a token mask the full logits hold -inf for the disallowed tokens:
// they are not among the likely ones (a client would read a null logprob,
// JSON having no -inf). The allowed ones' logprobs are over the allowed set.
TEST(TopLogprobsTest, MaskedTokensAreNotListed) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> masked = {1.0f, -inf, 0.5f, -inf, 2.0f};
  std::vector<TopLogprob> top;
  TopLogprobs(sampler::LogitsInput::Full(masked), 4, &top);
  ASSERT_EQ(top.size(), 3u);
  const double lse = std::log(std::exp(1.0) + std::exp(0.5) + std::exp(2.0));
  const int32_t ids[] = {4, 0, 2};
  for (size_t i = 0; i < top.size(); ++i) {
    EXPECT_EQ(top[i].token, ids[i]) << i;
    EXPECT_NEAR(top[i].logprob, masked[ids[i]] - lse, 1e-6) << i;
  }
  TopLogprobs(sampler::LogitsInput::Full(masked), 2, &top);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[1].token, 0);
  // Unmasked: k of them.
  const std::vector<float> plain = {0.0f, 1.0f, 1.0f};
  TopLogprobs(sampler::LogitsInput::Full(plain), 5, &top);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].token, 1);
  EXPECT_EQ(top[1].token, 2);
}

}  // namespace
}  // namespace llm::client
