// Speculative decoding in the generation loop, over fake ports: the output
// (tokens, text, events, stop reason) is the same as without speculation,
// greedy and sampled (a chi-squared test of the sampled distribution against
// the exact one, and seed by seed); stops inside an accepted run; rejected
// proposals rolled back by the next request or Prefill.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "client/generate/fake_ports.h"
#include "client/generate/generate_loop.h"

namespace llm::client {
namespace {

using ::testing::ElementsAre;
using testing::FakeModel;
using testing::FakeTokenizer;
using ::testing::HasSubstr;
using testing::kFakeEos;
using testing::kFakeVocab;

GenerateParams Greedy(int32_t max_tokens, int32_t speculate) {
  GenerateParams p;
  p.sampling.temperature = 0;
  p.max_tokens = max_tokens;
  p.speculate = speculate;
  return p;
}

v1::Logits Float32Logits(const std::vector<float>& values) {
  v1::Logits logits;
  logits.set_encoding(v1::LogitsOptions::LOGITS_FLOAT32);
  logits.set_float32(std::string(reinterpret_cast<const char*>(values.data()), 4 * values.size()));
  return logits;
}

// A chain that mostly cycles 0 -> 1 -> ... -> 5 -> 0, but skips a token at
// every 7th position: n-gram proposals are often right and sometimes wrong.
v1::Logits Cycle(const std::vector<int32_t>& held) {
  std::vector<float> values(kFakeVocab, 0.0f);
  const int32_t next = (held.back() + 1 + (held.size() % 7 == 0 ? 1 : 0)) % 6;
  values[next] = 10.0f;
  values[(next + 1) % 6] = 5.0f;  // so that top logprobs list something
  return Float32Logits(values);
}

// One loop over fake ports, and what a generation streamed.
struct Harness {
  explicit Harness(const LoopOptions& options = {}) : loop(tokenizer, model, options) {
    for (int32_t id = 0; id < kFakeVocab; ++id) tokenizer.bytes[id] = StrCat("<", id, ">");
  }
  absl::StatusOr<GenerateResult> Generate(const GenerateParams& params,
                                          std::vector<int32_t> prompt) {
    return loop.Generate(session, prompt, params, [this](const TokenEvent& e) {
      std::string line = StrCat(e.token, " '", e.text, "' ", e.logprob);
      for (const TopLogprob& t : e.top) line += StrCat(" ", t.token, ":", t.logprob);
      events.push_back(line);
    });
  }
  // The model session holds the client's tokens, and more only with an
  // overhang.
  void ExpectConsistent() {
    ASSERT_TRUE(model.sessions.contains(session.id)) << session.id;
    const std::vector<int32_t>& held = model.sessions[session.id];
    ASSERT_GE(held.size(), session.tokens.size());
    EXPECT_EQ(std::vector<int32_t>(held.begin(), held.begin() + session.tokens.size()),
              session.tokens);
    EXPECT_EQ(held.size() > session.tokens.size(), session.overhang);
  }
  int Sends() const {
    int n = 0;
    for (const std::string& l : log) n += l.rfind("send", 0) == 0 ? 1 : 0;
    return n;
  }

  std::vector<std::string> log;
  FakeTokenizer tokenizer{&log};
  FakeModel model{&log};
  GenerateLoop loop;
  Session session;
  std::vector<std::string> events;
};

TEST(GenerateLoopSpeculationTest, GreedyOutputIsTheSameTokenForToken) {
  const std::vector<int32_t> prompt = {0, 1, 2, 3, 4, 5, 0, 1};
  Harness plain, fast;
  plain.model.logits_after = fast.model.logits_after = Cycle;
  GenerateParams p = Greedy(40, 0);
  p.top_logprobs = 2;
  absl::StatusOr<GenerateResult> want = plain.Generate(p, prompt);
  ASSERT_TRUE(want.ok()) << want.status();
  p.speculate = 4;
  absl::StatusOr<GenerateResult> got = fast.Generate(p, prompt);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->tokens, want->tokens);
  EXPECT_EQ(got->text, want->text);
  EXPECT_EQ(got->stop_reason, want->stop_reason);
  EXPECT_EQ(fast.events, plain.events);
  EXPECT_EQ(want->proposed_tokens, 0);
  EXPECT_GT(got->accepted_tokens, 10);
  EXPECT_GT(got->proposed_tokens, got->accepted_tokens);  // some were rejected
  EXPECT_LT(fast.Sends(), plain.Sends() / 2);
  // Rejections were rolled back by the next request.
  bool rolled_back = false;
  for (const std::string& l : fast.log) rolled_back |= l.find(" @") != std::string::npos;
  EXPECT_TRUE(rolled_back);
  fast.ExpectConsistent();
  // The next call's Prefill drops an overhang first.
  ASSERT_TRUE(fast.Generate(Greedy(1, 4), {3}).ok());
  EXPECT_FALSE(fast.session.overhang);
  fast.ExpectConsistent();
}

TEST(GenerateLoopSpeculationTest, StopsInsideAnAcceptedRunExactlyAsWithout) {
  const std::vector<int32_t> prompt = {0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5, 0};
  for (int max_tokens : {3, 5, 9}) {
    for (const char* stop : {"", "<4><5>", "<2>"}) {
      SCOPED_TRACE(StrCat("max_tokens ", max_tokens, " stop '", stop, "'"));
      Harness plain, fast;
      plain.model.logits_after = fast.model.logits_after = [](const std::vector<int32_t>& held) {
        std::vector<float> values(kFakeVocab, 0.0f);
        values[(held.back() + 1) % 6] = 10.0f;  // a pure cycle: every proposal right
        return Float32Logits(values);
      };
      GenerateParams p = Greedy(max_tokens, 0);
      if (*stop != '\0') p.stop = {stop};
      absl::StatusOr<GenerateResult> want = plain.Generate(p, prompt);
      ASSERT_TRUE(want.ok()) << want.status();
      p.speculate = 8;
      absl::StatusOr<GenerateResult> got = fast.Generate(p, prompt);
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(got->tokens, want->tokens);
      EXPECT_EQ(got->text, want->text);
      EXPECT_EQ(got->stop_reason, want->stop_reason);
      EXPECT_EQ(fast.events, plain.events);
      EXPECT_EQ(fast.Sends(), 1);  // one step proposed the whole run
      fast.ExpectConsistent();
    }
  }
}

TEST(GenerateLoopSpeculationTest, AnAcceptedEosEndsTheGenerationAndIsRolledBack) {
  // The default chain: t -> t + 1, and 9 is EOS. The prompt shows the way.
  const std::vector<int32_t> prompt = {3, 4, 5, 6, 7, 8, 9, 2};
  Harness plain, fast;
  absl::StatusOr<GenerateResult> want = plain.Generate(Greedy(100, 0), prompt);
  ASSERT_TRUE(want.ok()) << want.status();
  absl::StatusOr<GenerateResult> got = fast.Generate(Greedy(100, 8), prompt);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->stop_reason, StopReason::kEos);
  EXPECT_EQ(got->tokens, want->tokens);
  EXPECT_THAT(got->tokens, ElementsAre(3, 4, 5, 6, 7, 8));
  EXPECT_EQ(fast.session.tokens.back(), 8);
  EXPECT_TRUE(fast.session.overhang);  // the EOS (and what followed) is in the model
  fast.ExpectConsistent();
  ASSERT_TRUE(fast.Generate(Greedy(1, 8), {1}).ok());
  EXPECT_THAT(fast.log, ::testing::Contains(HasSubstr("send")));
  EXPECT_FALSE(fast.session.overhang);
  fast.ExpectConsistent();
}

TEST(GenerateLoopSpeculationTest, ALostSessionDuringASpeculativeStepIsRebuilt) {
  const std::vector<int32_t> prompt = {0, 1, 2, 3, 4, 5, 0, 1};
  Harness plain, fast;
  plain.model.logits_after = fast.model.logits_after = Cycle;
  absl::StatusOr<GenerateResult> want = plain.Generate(Greedy(30, 0), prompt);
  ASSERT_TRUE(want.ok()) << want.status();
  fast.model.fail_step = 1;
  fast.model.fail_with = absl::NotFoundError("session expired");
  absl::StatusOr<GenerateResult> got = fast.Generate(Greedy(30, 4), prompt);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->session_rebuilds, 1);
  EXPECT_EQ(got->tokens, want->tokens);
  EXPECT_EQ(got->text, want->text);
  fast.ExpectConsistent();
}

TEST(GenerateLoopSpeculationTest, AServerThatIgnoresProposalsIsDecodedWithout) {
  const std::vector<int32_t> prompt = {0, 1, 2, 3, 4, 5, 0, 1};
  Harness plain, old;
  plain.model.logits_after = old.model.logits_after = Cycle;
  old.model.speculates = false;
  absl::StatusOr<GenerateResult> want = plain.Generate(Greedy(30, 0), prompt);
  ASSERT_TRUE(want.ok()) << want.status();
  absl::StatusOr<GenerateResult> got = old.Generate(Greedy(30, 4), prompt);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->tokens, want->tokens);
  EXPECT_EQ(got->proposed_tokens, 0);
  EXPECT_FALSE(old.session.overhang);
  old.ExpectConsistent();
  // Proposals were sent once, then no more.
  int with_proposals = 0;
  for (const std::string& l : old.log) with_proposals += l.find(" +") != std::string::npos;
  EXPECT_EQ(with_proposals, 1);
}

TEST(GenerateLoopSpeculationTest, SpeculateOutOfRangeIsInvalid) {
  Harness h;
  EXPECT_TRUE(absl::IsInvalidArgument(h.Generate(Greedy(5, -1), {1}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(h.Generate(Greedy(5, kMaxProposedTokens + 1), {1}).status()));
  EXPECT_TRUE(h.model.prefills.empty());
}

// ---------------------------------------------------------------------------
// Sampling: the distribution is unchanged.

// Fixed logits at every position: tokens 0..4 have these, the rest -30.
constexpr float kLogits[] = {2.0f, 1.6f, 1.1f, 0.4f, -0.3f};

v1::Logits Fixed(const std::vector<int32_t>&) {
  std::vector<float> values(kFakeVocab, -30.0f);
  for (int i = 0; i < 5; ++i) values[i] = kLogits[i];
  return Float32Logits(values);
}

// What the sampler draws from with temperature 0.8 and top_k 4.
std::vector<double> ExactDistribution() {
  std::vector<double> p(4);
  double sum = 0;
  for (int i = 0; i < 4; ++i) sum += p[i] = std::exp(kLogits[i] / 0.8);
  for (double& x : p) x /= sum;
  return p;
}

double ChiSquared(const std::vector<int64_t>& counts, const std::vector<double>& p) {
  int64_t n = 0;
  for (int64_t c : counts) n += c;
  double chi2 = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const double expected = static_cast<double>(n) * p[i];
    chi2 += (counts[i] - expected) * (counts[i] - expected) / expected;
  }
  return chi2;
}

// 3 degrees of freedom: P(chi2 > 16.27) = 0.001.
constexpr double kChi2Threshold = 16.27;

TEST(GenerateLoopSpeculationTest, SampledOutputHasTheSameDistribution) {
  // The proposer always proposes token 1 (p ~ 0.28): often rejected.
  LoopOptions options;
  options.propose = [](std::span<const int32_t>, int32_t max_tokens, std::vector<int32_t>* out) {
    out->assign(static_cast<size_t>(max_tokens), 1);
  };
  Harness fast(options);
  Harness plain;
  fast.model.logits_after = plain.model.logits_after = Fixed;
  GenerateParams p;
  p.sampling.temperature = 0.8f;
  p.sampling.top_k = 4;
  p.max_tokens = 4;
  p.ignore_eos = true;
  const std::vector<double> exact = ExactDistribution();
  // Positions 1..3 are drawn from the rows of proposed tokens (position 0
  // from the prefill's).
  std::vector<int64_t> counts(4, 0);
  std::vector<int64_t> first(4, 0);  // position 1 alone
  int64_t accepted = 0, proposed = 0;
  constexpr int kRuns = 3000;
  for (int seed = 0; seed < kRuns; ++seed) {
    p.sampling.seed = static_cast<uint64_t>(seed);
    p.speculate = 0;
    fast.session = Session();
    plain.session = Session();
    absl::StatusOr<GenerateResult> want = plain.Generate(p, {0});
    ASSERT_TRUE(want.ok()) << want.status();
    p.speculate = 3;
    absl::StatusOr<GenerateResult> got = fast.Generate(p, {0});
    ASSERT_TRUE(got.ok()) << got.status();
    // The same draws: one rng draw per token either way.
    ASSERT_EQ(got->tokens, want->tokens) << "seed " << seed;
    for (size_t i = 1; i < got->tokens.size(); ++i) ++counts[got->tokens[i]];
    ++first[got->tokens[1]];
    accepted += got->accepted_tokens;
    proposed += got->proposed_tokens;
  }
  EXPECT_LT(ChiSquared(counts, exact), kChi2Threshold);
  EXPECT_LT(ChiSquared(first, exact), kChi2Threshold);
  // Some proposals were accepted, some rejected (those after a rejection
  // are never checked).
  EXPECT_GT(accepted, kRuns / 4);
  EXPECT_LT(accepted, proposed / 2);

  // The test's power: rules that are wrong fail it with these many draws.
  // Always accepting: position 1 would always be the proposal.
  std::vector<int64_t> always(4, 0);
  always[1] = kRuns;
  EXPECT_GT(ChiSquared(always, exact), 100 * kChi2Threshold);
  // Accepting with p(x) but then redrawing from p itself (x not removed):
  // x gets p(x) + (1 - p(x)) p(x).
  std::vector<int64_t> redraw(4);
  for (int i = 0; i < 4; ++i) {
    const double q = i == 1 ? exact[1] + (1 - exact[1]) * exact[1] : (1 - exact[1]) * exact[i];
    redraw[i] = std::llround(q * kRuns);
  }
  EXPECT_GT(ChiSquared(redraw, exact), 3 * kChi2Threshold);
}

}  // namespace
}  // namespace llm::client
