// Speculative decoding through the real servers: tokenizer_server (the mpt
// vocabulary) and model_server (a small random-weight model of that
// vocabulary's size) on loopback, driven by the client library. With
// --speculate the generation proposes n-gram continuations on the
// DecodeStream (proposed, truncate_to) and keeps what the sampler agrees
// with; its output must be the output without, token for token, greedy and
// seeded, over two turns of one session (the second turn's Prefill rolls
// back the first's rejected proposals).
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "client/generator.h"
#include "common/strings.h"
#include "common/test_paths.h"
#include "llm/v1/model.grpc.pb.h"
#include "llm/v1/tokenizer.grpc.pb.h"
#include "model_svc/testing/random_model.h"
#include "tests/server_process.h"

namespace llm {
namespace {

constexpr int64_t kMptVocabSize = 50432;

std::string MptPath() {
  return testing::SharedDir() + "/conformance/llama-vocab/ggml-vocab-mpt.gguf";
}

// A small random Llama model of the mpt vocabulary's size; "" on failure.
std::string WriteModel() {
  model::testing::RandomModelSpec spec;
  spec.name = "random-speculation";
  spec.vocab = kMptVocabSize;
  spec.d_model = 64;
  spec.layers = 2;
  spec.heads = 2;
  spec.kv_heads = 1;
  spec.ff = 128;
  spec.tied = true;
  spec.seed = 11;
  const std::string path = StrCat(::testing::TempDir(), "speculation_", getpid(), ".gguf");
  absl::StatusOr<std::string> bytes = model::testing::RandomModelGguf(spec);
  if (!bytes.ok()) return "";
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes->data(), static_cast<std::streamsize>(bytes->size()));
  return out ? path : "";
}

class SpeculationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(MptPath())) GTEST_SKIP() << "missing " << MptPath();
    testing::StartServer(&tokenizer_, "tokenizer_server", {"--vocab", MptPath()},
                         std::chrono::seconds(60));
    ASSERT_NE(tokenizer_.stub, nullptr) << tokenizer_.error;
    model_path_ = WriteModel();
    ASSERT_FALSE(model_path_.empty());
    testing::StartServer(&model_, "model_server",
                         {"--model", model_path_, "--backend", "cpu", "--threads", "2",
                          "--kv_cache_mb", "16", "--drain_seconds", "1"},
                         std::chrono::seconds(60));
    ASSERT_NE(model_.stub, nullptr) << model_.error;
    client::ClientOptions o;
    o.tokenizer_address = tokenizer_.process->address();
    o.model_address = model_.process->address();
    o.rpc_timeout = absl::Seconds(60);
    absl::StatusOr<std::unique_ptr<client::Generator>> g = client::Generator::Connect(o);
    ASSERT_TRUE(g.ok()) << g.status();
    generator_ = *std::move(g);
  }

  void TearDown() override {
    generator_.reset();
    testing::StopServerAndExpectCleanExit(&model_);
    testing::StopServerAndExpectCleanExit(&tokenizer_);
    if (!model_path_.empty()) std::filesystem::remove(model_path_);
  }

  struct Turns {
    std::vector<client::GenerateResult> results;
    std::vector<std::vector<int32_t>> events;  // the tokens streamed, per turn
  };

  // Two turns on one session: the prompt, then a follow-up.
  Turns Run(client::GenerateParams params) {
    Turns out;
    client::Session session;
    for (const char* text : {"The lighthouse keeper said that the lighthouse keeper said that the",
                             " and then the keeper said"}) {
      absl::StatusOr<std::vector<int32_t>> prompt = generator_->Encode(text);
      EXPECT_TRUE(prompt.ok()) << prompt.status();
      if (!prompt.ok()) return out;
      std::vector<int32_t>& events = out.events.emplace_back();
      absl::StatusOr<client::GenerateResult> r =
          generator_->Generate(session, *prompt, params, [&](const client::TokenEvent& e) {
            if (e.token >= 0) events.push_back(e.token);
          });
      EXPECT_TRUE(r.ok()) << r.status();
      if (!r.ok()) return out;
      out.results.push_back(*std::move(r));
      params.sampling.seed += 1;
    }
    EXPECT_TRUE(generator_->Release(session).ok());
    return out;
  }

  void ExpectSame(client::GenerateParams params, int32_t speculate) {
    const Turns plain = Run(params);
    params.speculate = speculate;
    const Turns fast = Run(params);
    ASSERT_EQ(plain.results.size(), 2u);
    ASSERT_EQ(fast.results.size(), 2u);
    int64_t proposed = 0, accepted = 0;
    for (size_t i = 0; i < 2; ++i) {
      SCOPED_TRACE(StrCat("turn ", i));
      EXPECT_EQ(fast.results[i].tokens, plain.results[i].tokens);
      EXPECT_EQ(fast.results[i].text, plain.results[i].text);
      EXPECT_EQ(fast.results[i].stop_reason, plain.results[i].stop_reason);
      EXPECT_EQ(fast.events[i], plain.events[i]);
      EXPECT_EQ(plain.results[i].proposed_tokens, 0);
      proposed += fast.results[i].proposed_tokens;
      accepted += fast.results[i].accepted_tokens;
    }
    EXPECT_GT(proposed, 0);
    EXPECT_GT(accepted, 0);  // a random model repeats itself a lot
    EXPECT_LE(accepted, proposed);
  }

  testing::ServerState<v1::Tokenizer> tokenizer_;
  testing::ServerState<v1::Model> model_;
  std::string model_path_;
  std::unique_ptr<client::Generator> generator_;
};

TEST_F(SpeculationTest, GreedyOutputIsTheSameTokenForToken) {
  client::GenerateParams p;
  p.sampling.temperature = 0;
  p.max_tokens = 96;
  p.ignore_eos = true;
  for (int32_t k : {1, 4, client::kMaxProposedTokens}) {
    SCOPED_TRACE(StrCat("speculate ", k));
    ExpectSame(p, k);
  }
}

TEST_F(SpeculationTest, SeededSamplingIsTheSameTokenForToken) {
  client::GenerateParams p;
  p.sampling.temperature = 0.7f;
  p.sampling.top_k = 20;
  p.sampling.seed = 5;
  p.max_tokens = 96;
  p.ignore_eos = true;
  ExpectSame(p, 6);
}

TEST_F(SpeculationTest, SpeculationOutOfRangeIsInvalid) {
  client::GenerateParams p;
  p.speculate = client::kMaxProposedTokens + 1;
  client::Session session;
  absl::StatusOr<std::vector<int32_t>> prompt = generator_->Encode("Hello");
  ASSERT_TRUE(prompt.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(generator_->Generate(session, *prompt, p, nullptr).status()));
}

}  // namespace
}  // namespace llm
