// The real Gemma 3 270M (Q4_K_M) in the in-process engine, against
// llama.cpp's recorded outputs on the same file and text
// (tests/data/llamacpp_reference_gemma3.json, produced by
// tests/data/llamacpp_reference.py --bos). Gemma 3 exercises what SmolLM2
// does not: NEOX RoPE, QK-norm, GeGLU, post-norms, head dimension 256,
// sliding-window layers with their own RoPE base, a 262,144-token tied
// embedding in Q8_0, and Q5_0 / Q4_K / Q6_K matrices.
//
// It is a base model: it is judged by numbers, not answers. Token ids come
// from the reference (llama.cpp's tokenizer), so this test checks the model
// alone.
//
// Needs models/gemma-3-270m-q4_k_m.gguf (scripts/fetch-model.sh gemma3-270m;
// scripts/test.sh fetches it).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "common/mapped_file.h"
#include "common/test_paths.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model_svc/engine/loader.h"
#include "nlohmann/json.hpp"
#include "tests/llamacpp_reference.h"

namespace llm {
namespace {

std::string ModelPath() { return llm::testing::SourceDir() + "/models/gemma-3-270m-q4_k_m.gguf"; }

nlohmann::json Reference() {
  return llm::testing::LlamaCppReference("llamacpp_reference_gemma3.json");
}

class Gemma3ModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    engine::LoadOptions options;
    options.model_path = ModelPath();
    options.kv_cache_mb = 64;
    auto e = engine::LoadEngine(options);
    ASSERT_TRUE(e.ok()) << e.status() << " (run scripts/fetch-model.sh gemma3-270m)";
    engine_ = e->release();
  }
  static void TearDownTestSuite() { delete engine_; }

  static engine::Engine* engine_;
};

engine::Engine* Gemma3ModelTest::engine_ = nullptr;

TEST_F(Gemma3ModelTest, ConfigIsGemma3) {
  const model::ModelConfig& c = engine_->config();
  EXPECT_EQ(c.architecture, "gemma3");
  EXPECT_EQ(c.vocab_size, 262144);
  EXPECT_EQ(c.embedding_length, 640);
  EXPECT_EQ(c.block_count, 18);
  EXPECT_EQ(c.head_count, 4);
  EXPECT_EQ(c.head_count_kv, 1);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.sliding_window, 512);
  EXPECT_TRUE(c.tied_embeddings);
  EXPECT_TRUE(c.IsSlidingLayer(0));
  EXPECT_FALSE(c.IsSlidingLayer(5));
}

// Perplexity of the reference text's tokens (context: those 256 tokens)
// within 1% of llama.cpp's, on the path whose KV precision matches ours
// (f16, llama.cpp's default and the engine's); the test prints llama.cpp's
// other paths for scale. The text is shorter than the 512-position window,
// so this does not exercise the window (SlidingWindowMatters does).
TEST_F(Gemma3ModelTest, PerplexityWithinOnePercentOfLlamaCpp) {
  const nlohmann::json ref = Reference();
  engine::AppendRequest r;
  r.tokens = ref["tokens"].get<std::vector<int32_t>>();
  r.all_logits = true;
  auto result = engine_->Append(r);
  ASSERT_TRUE(result.ok()) << result.status();
  const double ppl = llm::testing::Perplexity(result->logits, r.tokens);
  const double theirs = ref["perplexity"].get<double>();
  std::printf("perplexity: ours %.4f, llama.cpp %.4f (decode path %.4f, flash attention %.4f)\n",
              ppl, theirs, ref["perplexity_decode_path"].get<double>(),
              ref["perplexity_flash_attn"].get<double>());
  RecordProperty("perplexity", std::to_string(ppl));
  EXPECT_LT(std::fabs(ppl / theirs - 1), 0.01) << "ours " << ppl << ", llama.cpp " << theirs;
  ASSERT_TRUE(engine_->Release(result->session_id).ok());
}

// Top-1 after every position against llama.cpp's three paths (its batched
// prefill, its decode path of one token per evaluation, flash attention).
// llama.cpp's paths agree with each other at 242-246 of 256 positions (its
// prefill with its decode path at 242), disagreeing at near-ties. We ask, of
// each path, at least the agreement llama.cpp's prefill has with its decode
// path, and that every disagreement is a near-tie: llama.cpp's top two
// logits (of its prefill path) within kNearTie. Measured: 247 (decode path),
// 243 (prefill), 242 (flash attention); the target of 98% against the
// decode path is above what llama.cpp's own prefill reaches (94.5%).
TEST_F(Gemma3ModelTest, TopOneAgreesWithLlamaCpp) {
  constexpr float kNearTie = 0.5f;  // logits; the median gap is 0.93
  const nlohmann::json ref = Reference();
  engine::AppendRequest r;
  r.tokens = ref["tokens"].get<std::vector<int32_t>>();
  r.all_logits = true;
  auto result = engine_->Append(r);
  ASSERT_TRUE(result.ok()) << result.status();
  const auto margin = ref["top1_margin"].get<std::vector<float>>();
  const auto prefill = ref["top1"].get<std::vector<int32_t>>();
  const auto decode = ref["top1_decode_path"].get<std::vector<int32_t>>();
  int theirs = 0;  // llama.cpp's prefill against its decode path
  for (size_t i = 0; i < decode.size(); ++i) theirs += prefill[i] == decode[i];
  for (const char* path : {"top1_decode_path", "top1", "top1_flash_attn"}) {
    SCOPED_TRACE(path);
    const auto top1 = ref[path].get<std::vector<int32_t>>();
    ASSERT_EQ(top1.size(), result->logits.size());
    int agree = 0;
    std::string disagreements;
    for (size_t i = 0; i < top1.size(); ++i) {
      if (model::Argmax(result->logits[i]) == top1[i]) {
        ++agree;
        continue;
      }
      disagreements += " " + std::to_string(i) + " (margin " + std::to_string(margin[i]) + ")";
      EXPECT_LT(margin[i], kNearTie) << "position " << i << " is not a near-tie";
    }
    std::printf(
        "agreement with llama.cpp's %s: %d/%zu (its prefill with its decode path: %d); "
        "disagreements at:%s\n",
        path, agree, top1.size(), theirs, disagreements.c_str());
    RecordProperty(std::string(path) + "_agreement", std::to_string(agree));
    EXPECT_GE(agree, theirs) << "disagreements at:" << disagreements;
  }
  ASSERT_TRUE(engine_->Release(result->session_id).ok());
}

// Greedy decoding of a fixed prompt gives llama.cpp's continuation token for
// token, up to the first near-tie (our top two logits within 0.1; none at
// present).
TEST_F(Gemma3ModelTest, GreedyContinuationMatchesLlamaCpp) {
  constexpr float kNearTie = 0.1f;
  const nlohmann::json ref = Reference();
  const auto expected = ref["greedy_continuation"].get<std::vector<int32_t>>();
  engine::AppendRequest r;
  r.tokens = ref["prompt_tokens"].get<std::vector<int32_t>>();
  auto step = engine_->Append(r);
  ASSERT_TRUE(step.ok()) << step.status();
  size_t equal = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    const model::Logits& l = step->logits.back();
    const int32_t next = model::Argmax(l);
    if (next != expected[i]) {
      std::vector<float> sorted = l.values;
      std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
      EXPECT_LT(sorted[0] - sorted[1], kNearTie) << "token " << i << " is not a near-tie";
      break;
    }
    ++equal;
    engine::AppendRequest d;
    d.session_id = step->session_id;
    d.tokens = {next};
    d.decode = true;
    step = engine_->Append(d);
    ASSERT_TRUE(step.ok()) << step.status();
  }
  std::printf("greedy continuation: %zu/%zu tokens equal to llama.cpp's\n", equal, expected.size());
  RecordProperty("greedy_tokens_equal_to_llama_cpp", std::to_string(equal));
  ASSERT_TRUE(engine_->Release(step->session_id).ok());
}

// Past 512 positions the sliding layers see only the last 512 (the window
// moves with every decode step): prefill of 600 tokens and prefill of 590
// plus ten decodes agree at the last position. The sequence is the
// reference text's tokens, repeated. (That the window is applied at all is
// pinned by the random-weight gemma3 models against the reference forward,
// model_test, whose window is 8 positions of 20.)
TEST_F(Gemma3ModelTest, SlidingWindowHoldsPrefillEqualsDecode) {
  const nlohmann::json ref = Reference();
  const auto text = ref["tokens"].get<std::vector<int32_t>>();
  std::vector<int32_t> tokens;
  while (tokens.size() < 600) tokens.insert(tokens.end(), text.begin() + 1, text.end());
  tokens.resize(600);
  tokens[0] = text[0];  // BOS
  // Prefill of all 600 vs prefill of 590 and ten decodes: the same argmax at
  // the last position, and logits within float noise (different batching of
  // the same positions; the window moves during the decodes).
  engine::AppendRequest all;
  all.tokens = tokens;
  auto whole = engine_->Append(all);
  ASSERT_TRUE(whole.ok()) << whole.status();
  engine::AppendRequest head;
  head.tokens.assign(tokens.begin(), tokens.end() - 10);
  auto step = engine_->Append(head);
  ASSERT_TRUE(step.ok()) << step.status();
  for (size_t i = tokens.size() - 10; i < tokens.size(); ++i) {
    engine::AppendRequest d;
    d.session_id = step->session_id;
    d.tokens = {tokens[i]};
    d.decode = true;
    step = engine_->Append(d);
    ASSERT_TRUE(step.ok()) << step.status();
  }
  const model::Logits& a = whole->logits.back();
  const model::Logits& b = step->logits.back();
  EXPECT_EQ(model::Argmax(a), model::Argmax(b));
  double max_diff = 0;
  for (size_t j = 0; j < a.values.size(); ++j) {
    max_diff = std::max<double>(max_diff, std::fabs(a.values[j] - b.values[j]));
  }
  EXPECT_LT(max_diff, 0.05);
  ASSERT_TRUE(engine_->Release(whole->session_id).ok());
  ASSERT_TRUE(engine_->Release(step->session_id).ok());
}

}  // namespace
}  // namespace llm
