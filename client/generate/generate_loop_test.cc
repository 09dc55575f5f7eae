// The generation loop over fake ports (fake_ports.h): stops, pipelining,
// cancel, lost sessions and errors, with no services.
#include "client/generate/generate_loop.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "client/generate/fake_ports.h"

namespace llm::client {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using testing::FakeModel;
using testing::FakeTokenizer;
using testing::kFakeEos;

GenerateParams Greedy(int32_t max_tokens) {
  GenerateParams p;
  p.sampling.temperature = 0;
  p.max_tokens = max_tokens;
  return p;
}

class GenerateLoopTest : public ::testing::Test {
 protected:
  GenerateLoopTest() {
    for (int32_t id = 0; id < testing::kFakeVocab; ++id)
      tokenizer_.bytes[id] = StrCat("<", id, ">");
  }

  absl::StatusOr<GenerateResult> Generate(const GenerateParams& params,
                                          std::vector<int32_t> prompt = {1},
                                          const TokenCallback& on_token = nullptr) {
    return loop_.Generate(session_, prompt, params, on_token);
  }
  // The model session holds exactly what the client's copy says.
  void ExpectSynced() {
    ASSERT_TRUE(model_.sessions.contains(session_.id)) << session_.id;
    EXPECT_EQ(model_.sessions[session_.id], session_.tokens);
  }

  std::vector<std::string> log_;
  FakeTokenizer tokenizer_{&log_};
  FakeModel model_{&log_};
  GenerateLoop loop_{tokenizer_, model_};
  Session session_;
};

TEST_F(GenerateLoopTest, StopsAtEosWithoutFeedingIt) {
  absl::StatusOr<GenerateResult> r = Generate(Greedy(100));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stop_reason, StopReason::kEos);
  EXPECT_THAT(r->tokens, ElementsAre(2, 3, 4, 5, 6, 7, 8));
  EXPECT_EQ(r->text, "<2><3><4><5><6><7><8>");
  EXPECT_EQ(r->prompt_tokens, 1);
  EXPECT_THAT(session_.tokens, ElementsAre(1, 2, 3, 4, 5, 6, 7, 8));
  EXPECT_TRUE(session_.pending.empty());
  ExpectSynced();
  EXPECT_EQ(model_.closes, 1);
}

// prompt_logprobs: the port's scores of the prompt after its first token
// reach the result; top_logprobs: each event lists the most likely tokens of
// its position (the fake's logits: 10 for token + 1, 0 elsewhere; ties go to
// the lower id), the sampled one first with the sampler's logprob.
TEST_F(GenerateLoopTest, ScoresThePromptAndListsTopLogprobs) {
  GenerateParams p = Greedy(2);
  p.prompt_logprobs = 0;
  p.top_logprobs = 2;
  std::vector<std::vector<TopLogprob>> tops;
  std::vector<float> logprobs;
  absl::StatusOr<GenerateResult> r = Generate(p, {1, 5, 9}, [&](const TokenEvent& e) {
    if (e.token < 0) return;
    EXPECT_EQ(e.prompt_logprobs.size(), tops.empty() ? 2u : 0u);
    tops.emplace_back(e.top.begin(), e.top.end());
    logprobs.push_back(e.logprob);
  });
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->prompt_logprobs.size(), 2u);
  EXPECT_EQ(r->prompt_logprobs[0].token(), 5);
  EXPECT_FLOAT_EQ(r->prompt_logprobs[0].logprob(), -0.05f);
  EXPECT_EQ(r->prompt_logprobs[1].token(), 9);
  const double best = 10 - std::log(std::exp(10.0) + (testing::kFakeVocab - 1));
  const double rest = -std::log(std::exp(10.0) + (testing::kFakeVocab - 1));
  ASSERT_EQ(tops.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const int32_t sampled = r->tokens[i];
    ASSERT_EQ(tops[i].size(), 2u);
    EXPECT_EQ(tops[i][0].token, sampled);
    EXPECT_NEAR(tops[i][0].logprob, best, 1e-6);
    EXPECT_NEAR(tops[i][0].logprob, logprobs[i], 1e-6);
    EXPECT_EQ(tops[i][1].token, 0);
    EXPECT_NEAR(tops[i][1].logprob, rest, 1e-6);
  }
  p.top_logprobs = kMaxTopLogprobs + 1;
  EXPECT_EQ(Generate(p).status().code(), absl::StatusCode::kInvalidArgument);
}

// One generation at a time: a second one on the same loop while the first
// runs (here from its on_token; from another thread alike) is refused, and
// the first goes on unharmed; the loop serves the next one after it.
TEST_F(GenerateLoopTest, RefusesASecondGenerationWhileOneRuns) {
  Session other;
  std::optional<absl::Status> nested;
  absl::StatusOr<GenerateResult> r = Generate(Greedy(3), {1}, [&](const TokenEvent& e) {
    if (e.token < 0 || nested.has_value()) return;
    const std::vector<int32_t> prompt = {1};
    nested = loop_.Generate(other, prompt, Greedy(2), nullptr).status();
  });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->tokens, ElementsAre(2, 3, 4));
  ASSERT_TRUE(nested.has_value());
  EXPECT_EQ(nested->code(), absl::StatusCode::kFailedPrecondition) << *nested;
  EXPECT_TRUE(other.id.empty());  // the refused call touched nothing
  EXPECT_TRUE(Generate(Greedy(2)).ok());
}

TEST_F(GenerateLoopTest, IgnoreEosGoesOn) {
  GenerateParams p = Greedy(10);
  p.ignore_eos = true;
  absl::StatusOr<GenerateResult> r = Generate(p);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stop_reason, StopReason::kMaxTokens);
  EXPECT_THAT(r->tokens, ::testing::Contains(kFakeEos));
}

TEST_F(GenerateLoopTest, SendsEachTokenBeforeDetokenizingIt) {
  ASSERT_TRUE(Generate(Greedy(3)).ok());
  // The last token (max_tokens) is never sent: it is not fed.
  EXPECT_THAT(log_, ElementsAre("send 2", "text 2", "send 3", "text 3", "text 4"));
}

TEST_F(GenerateLoopTest, MaxTokensLeavesTheLastTokenPending) {
  absl::StatusOr<GenerateResult> r = Generate(Greedy(3));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stop_reason, StopReason::kMaxTokens);
  EXPECT_THAT(r->tokens, ElementsAre(2, 3, 4));
  EXPECT_THAT(session_.tokens, ElementsAre(1, 2, 3));
  EXPECT_THAT(session_.pending, ElementsAre(4));
  ExpectSynced();
  // The next call feeds it first.
  r = Generate(Greedy(1), {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->prompt_tokens, 1);
  EXPECT_THAT(r->tokens, ElementsAre(5));
}

TEST_F(GenerateLoopTest, StopStringAcrossTokensNeverReachesTheOutput) {
  tokenizer_.bytes[3] = "hel";
  tokenizer_.bytes[4] = "lo wo";
  tokenizer_.bytes[5] = "rld";
  GenerateParams p = Greedy(100);
  p.stop = {"zzz", "lo world"};
  std::string streamed;
  absl::StatusOr<GenerateResult> r =
      Generate(p, {1}, [&](const TokenEvent& e) { streamed += e.text; });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stop_reason, StopReason::kStopString);
  EXPECT_EQ(r->stop_string, "lo world");
  EXPECT_EQ(r->text, "<2>hel");
  EXPECT_EQ(streamed, r->text);
  EXPECT_THAT(r->tokens, ElementsAre(2, 3, 4, 5));
  // The token that completed the stop string was already sent: it is fed,
  // and the session holds exactly the tokens fed.
  EXPECT_THAT(session_.tokens, ElementsAre(1, 2, 3, 4, 5));
  EXPECT_TRUE(session_.pending.empty());
  ExpectSynced();
}

TEST_F(GenerateLoopTest, CancelStopsAtTheNextToken) {
  absl::StatusOr<GenerateResult> r = Generate(Greedy(100), {1}, [&](const TokenEvent& e) {
    if (e.token == 3) loop_.Cancel();
  });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stop_reason, StopReason::kCancelled);
  EXPECT_THAT(r->tokens, ElementsAre(2, 3));
  EXPECT_THAT(session_.tokens, ElementsAre(1, 2, 3));
  ExpectSynced();
  EXPECT_EQ(model_.closes, 1);  // closed cleanly, the session consistent
  EXPECT_TRUE(loop_.cancel_requested());
  loop_.ClearCancel();
  r = Generate(Greedy(1), {});
  EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << r.status();  // nothing to prefill
}

TEST_F(GenerateLoopTest, LostSessionIsRebuiltWithoutRepeatedText) {
  model_.fail_step = 2;  // the step of token 4
  model_.fail_with = absl::NotFoundError("session expired");
  absl::StatusOr<GenerateResult> r = Generate(Greedy(100));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stop_reason, StopReason::kEos);
  EXPECT_EQ(r->text, "<2><3><4><5><6><7><8>");
  EXPECT_THAT(r->tokens, ElementsAre(2, 3, 4, 5, 6, 7, 8));
  EXPECT_EQ(r->session_rebuilds, 1);
  // The whole history, and the token whose step failed, into a new session.
  ASSERT_EQ(model_.prefills.size(), 2u);
  EXPECT_THAT(model_.prefills[1], ElementsAre(1, 2, 3, 4));
  EXPECT_EQ(model_.releases, 0);  // NOT_FOUND: nothing to release
  EXPECT_THAT(session_.tokens, ElementsAre(1, 2, 3, 4, 5, 6, 7, 8));
  ExpectSynced();
}

TEST_F(GenerateLoopTest, UnavailableStepReleasesAndRebuilds) {
  model_.fail_step = 0;
  model_.fail_with = absl::UnavailableError("replica gone");
  absl::StatusOr<GenerateResult> r = Generate(Greedy(100));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->text, "<2><3><4><5><6><7><8>");
  EXPECT_EQ(r->session_rebuilds, 1);
  EXPECT_EQ(model_.releases, 1);  // the old session, in case it came back half-updated
  ExpectSynced();
}

TEST_F(GenerateLoopTest, DeadlineSurfacesAsDeadlineExceeded) {
  model_.fail_step = 1;
  model_.fail_with = absl::DeadlineExceededError("no read within 60s");
  absl::StatusOr<GenerateResult> r = Generate(Greedy(100));
  EXPECT_TRUE(absl::IsDeadlineExceeded(r.status())) << r.status();
  // The token of the failed step may or may not be in the model session.
  EXPECT_TRUE(session_.unsynced);
  EXPECT_THAT(session_.pending, ElementsAre(3));
  EXPECT_EQ(model_.prefills.size(), 1u);  // not retried
}

TEST_F(GenerateLoopTest, ContextLengthEndsTheGeneration) {
  model_.context = 4;
  absl::StatusOr<GenerateResult> r = Generate(Greedy(100));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stop_reason, StopReason::kContext);
  EXPECT_THAT(r->tokens, ElementsAre(2, 3, 4, 5));
  EXPECT_THAT(session_.tokens, ElementsAre(1, 2, 3, 4));
  EXPECT_THAT(session_.pending, ElementsAre(5));  // sampled, never fed
  ExpectSynced();
  EXPECT_EQ(StopReasonName(r->stop_reason), "context");
}

TEST_F(GenerateLoopTest, OutOfRangeStepEndsTheGenerationAsContext) {
  model_.capacity = 4;  // context_length() says nothing
  absl::StatusOr<GenerateResult> r = Generate(Greedy(100));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stop_reason, StopReason::kContext);
  EXPECT_THAT(r->tokens, ElementsAre(2, 3, 4, 5));
  EXPECT_THAT(session_.tokens, ElementsAre(1, 2, 3, 4));
  EXPECT_THAT(session_.pending, ElementsAre(5));
  ExpectSynced();
}

TEST_F(GenerateLoopTest, InvalidParamsAreRefusedBeforeAnyCall) {
  GenerateParams p = Greedy(0);
  EXPECT_TRUE(absl::IsInvalidArgument(Generate(p).status()));
  p = Greedy(5);
  p.stop = {""};
  EXPECT_TRUE(absl::IsInvalidArgument(Generate(p).status()));
  EXPECT_TRUE(model_.prefills.empty());
}

TEST_F(GenerateLoopTest, HeldBytesAreReleasedAsReplacementAtTheEnd) {
  tokenizer_.bytes[2] = "a\xE2\x82";  // the first two bytes of U+20AC
  absl::StatusOr<GenerateResult> r = Generate(Greedy(1));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->text, "a\xEF\xBF\xBD");
}

}  // namespace
}  // namespace llm::client
