// The generation loop under a constraint (GenerateParams::constraint), over
// fake ports whose model applies token masks as the model service does.
//
// The vocabulary: ids 0-8 are "a".."i", 9 is EOS, 10-15 are "k".."p". The
// fake model's greedy choice after token t is t + 1; masked, the draw falls
// to the allowed tokens.
#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "client/constrain/constraint.h"
#include "client/generate/fake_ports.h"
#include "client/generate/generate_loop.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace llm::client {
namespace {

using ::testing::ElementsAre;
using testing::FakeModel;
using testing::FakeTokenizer;
using ::testing::HasSubstr;
using testing::kFakeEos;
using testing::kFakeVocab;

std::string Letter(int32_t id) {
  return id == kFakeEos ? "" : std::string(1, static_cast<char>('a' + id));
}

class ConstrainedLoopTest : public ::testing::Test {
 protected:
  ConstrainedLoopTest() {
    constrain::Vocabulary v;
    for (int32_t id = 0; id < kFakeVocab; ++id) {
      tokenizer_.bytes[id] = Letter(id);
      v.token_bytes.push_back(Letter(id));
    }
    v.end_ids = {kFakeEos};
    compiler_ = *constrain::Compiler::Create(v);
  }

  std::shared_ptr<const constrain::Constraint> Compile(constrain::Kind kind, std::string text,
                                                       std::vector<std::string> choices = {}) {
    constrain::Spec spec;
    spec.kind = kind;
    spec.text = std::move(text);
    spec.choices = std::move(choices);
    absl::StatusOr<std::shared_ptr<const constrain::Constraint>> c = compiler_->Compile(spec);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *c : nullptr;
  }

  absl::StatusOr<GenerateResult> Generate(const GenerateParams& params,
                                          std::vector<int32_t> prompt = {0}) {
    Session session;
    return loop_.Generate(session, prompt, params, nullptr);
  }

  static GenerateParams Greedy(std::shared_ptr<const constrain::Constraint> c,
                               int32_t speculate = 0) {
    GenerateParams p;
    p.sampling.temperature = 0;
    p.max_tokens = 32;
    p.speculate = speculate;
    p.constraint = std::move(c);
    return p;
  }

  std::vector<std::string> log_;
  FakeTokenizer tokenizer_{&log_};
  FakeModel model_{&log_};
  GenerateLoop loop_{tokenizer_, model_};
  std::unique_ptr<constrain::Compiler> compiler_;
};

// Unconstrained, greedy from "a" runs "bcde..."; under "[bdf]{3}" every draw
// is an allowed letter, and the grammar's end is EOS.
TEST_F(ConstrainedLoopTest, EveryTokenIsOneTheGrammarAllows) {
  absl::StatusOr<GenerateResult> r = Generate(Greedy(Compile(constrain::Kind::kRegex, "[bdf]{3}")));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->text.size(), 3u);
  for (char c : r->text) EXPECT_THAT("bdf", HasSubstr(std::string(1, c))) << r->text;
  EXPECT_EQ(r->stop_reason, StopReason::kEos);
}

// A grammar with one continuation: its tokens are prefilled with the prompt
// (no decode step, no draw), and counted.
TEST_F(ConstrainedLoopTest, ForcedTokensAtTheStartArePrefilled) {
  absl::StatusOr<GenerateResult> r =
      Generate(Greedy(Compile(constrain::Kind::kChoice, "", {"bdf"})));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->text, "bdf");
  EXPECT_EQ(r->forced_tokens, 3);
  ASSERT_EQ(model_.prefills.size(), 1u);
  EXPECT_THAT(model_.prefills[0], ElementsAre(0, 1, 3, 5));
  EXPECT_EQ(r->prompt_tokens, 1);
}

// Forced tokens after a drawn one ride in the same decode step, as
// proposals that are sure to be kept: one step for "b" + "klm".
TEST_F(ConstrainedLoopTest, ForcedTokensAfterADrawGoInOneStep) {
  absl::StatusOr<GenerateResult> r = Generate(Greedy(Compile(constrain::Kind::kRegex, "[bd]klm")));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->text, "bklm");
  EXPECT_EQ(r->forced_tokens, 3);
  EXPECT_EQ(r->proposed_tokens, 0);  // forced tokens are not speculation's proposals
  EXPECT_THAT(log_, ::testing::Contains("send 1 +10,11,12"));
}

// A forced step's proposals are sure to be kept, so (greedy) it asks for
// lookahead like a step without proposals: the model service guesses the
// argmax of the last forced token's masked row, the next draw, instead of
// idling until the next request. Speculation's proposals, which a draw may
// reject, still turn it off.
TEST_F(ConstrainedLoopTest, AForcedStepKeepsLookahead) {
  absl::StatusOr<GenerateResult> r = Generate(Greedy(Compile(constrain::Kind::kRegex, "[bd]klm")));
  ASSERT_TRUE(r.ok()) << r.status();
  const auto forced = std::find(log_.begin(), log_.end(), "send 1 +10,11,12");
  ASSERT_NE(forced, log_.end());
  const size_t step = static_cast<size_t>(std::count_if(
      log_.begin(), forced, [](const std::string& l) { return l.starts_with("send"); }));
  ASSERT_LT(step, model_.step_lookahead.size());
  EXPECT_TRUE(model_.step_lookahead[step]);
  // Within max_tokens: no guess past the last token.
  log_.clear();
  model_.step_lookahead.clear();
  GenerateParams p = Greedy(Compile(constrain::Kind::kRegex, "[bd]klm"));
  p.max_tokens = 4;
  ASSERT_TRUE(Generate(p).ok());
  ASSERT_FALSE(model_.step_lookahead.empty());
  EXPECT_FALSE(model_.step_lookahead.back());
  // Speculation's proposals (the next two letters, which greedy takes;
  // nothing is forced under "[a-p]{6}"): no lookahead on a step that carries
  // them.
  log_.clear();
  model_.step_lookahead.clear();
  LoopOptions options;
  options.propose = [](std::span<const int32_t> history, int32_t, std::vector<int32_t>* out) {
    out->assign({history.back() + 1, history.back() + 2});
  };
  GenerateLoop speculating(tokenizer_, model_, options);
  Session session;
  absl::StatusOr<GenerateResult> s =
      speculating.Generate(session, std::vector<int32_t>{0},
                           Greedy(Compile(constrain::Kind::kRegex, "[a-p]{6}"), 2), nullptr);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->forced_tokens, 0);
  EXPECT_GT(s->accepted_tokens, 0);
  int speculative = 0;
  size_t i = 0;
  for (const std::string& l : log_) {
    if (!l.starts_with("send")) continue;
    if (l.find('+') != std::string::npos) {
      ++speculative;
      EXPECT_FALSE(model_.step_lookahead[i]) << l;
    }
    ++i;
  }
  EXPECT_GT(speculative, 0);
}

// Speculation under a constraint: proposals the grammar refuses are cut,
// the rows of the others are masked, and the output is the same as without.
TEST_F(ConstrainedLoopTest, SpeculationGivesTheSameConstrainedOutput) {
  const auto c = Compile(constrain::Kind::kRegex, "(bc|de|bd){6}");
  absl::StatusOr<GenerateResult> plain = Generate(Greedy(c, 0));
  absl::StatusOr<GenerateResult> fast = Generate(Greedy(c, 3));
  ASSERT_TRUE(plain.ok() && fast.ok()) << plain.status() << fast.status();
  EXPECT_EQ(fast->tokens, plain->tokens);
  EXPECT_EQ(fast->text, plain->text);
  EXPECT_GT(fast->proposed_tokens, 0);  // speculation ran
  EXPECT_GT(fast->accepted_tokens, 0);
}

// A draw under a mask is exact: the model's distribution restricted to the
// allowed tokens (a chi-squared test over seeds, 3 degrees of freedom,
// threshold 16.27 at p = 0.001).
TEST_F(ConstrainedLoopTest, DrawsFollowTheMaskedDistribution) {
  const std::vector<float> logits = {0.0f, 0.3f, 2.0f, 1.0f, -0.5f, 0.7f, 1.5f, 0.2f,
                                     0.1f, 0.0f, 0.9f, 0.4f, 0.0f,  0.0f, 0.0f, 0.0f};
  model_.logits_after = [&](const std::vector<int32_t>&) {
    v1::Logits l;
    l.set_encoding(v1::LogitsOptions::LOGITS_FLOAT32);
    l.set_float32(std::string(reinterpret_cast<const char*>(logits.data()), 4 * logits.size()));
    return l;
  };
  // First letter one of b, d, f, k (ids 1, 3, 5, 10), then anything.
  const auto c = Compile(constrain::Kind::kRegex, "[bdfk][a-p]*");
  const std::vector<int32_t> allowed = {1, 3, 5, 10};
  double z = 0;
  for (int32_t id : allowed) z += std::exp(logits[id]);
  std::map<int32_t, int> counts;
  constexpr int kDraws = 3000;
  for (int seed = 0; seed < kDraws; ++seed) {
    GenerateParams p;
    p.sampling.seed = static_cast<uint64_t>(seed);
    p.max_tokens = 1;
    p.constraint = c;
    absl::StatusOr<GenerateResult> r = Generate(p);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->tokens.size(), 1u);
    ++counts[r->tokens[0]];
  }
  double chi2 = 0;
  for (int32_t id : allowed) {
    const double expected = kDraws * std::exp(logits[id]) / z;
    chi2 += (counts[id] - expected) * (counts[id] - expected) / expected;
  }
  int outside = 0;
  for (const auto& [id, n] : counts) {
    if (std::find(allowed.begin(), allowed.end(), id) == allowed.end()) outside += n;
  }
  EXPECT_EQ(outside, 0);
  EXPECT_LT(chi2, 16.27) << "counts b=" << counts[1] << " d=" << counts[3] << " f=" << counts[5]
                         << " k=" << counts[10];
}

// A step that fails after carrying forced tokens (the session lost): the
// grammar rolls them back, the loop rebuilds the session, and the output
// is still in the language.
TEST_F(ConstrainedLoopTest, ALostStepRollsTheGrammarBack) {
  model_.fail_step = 0;
  model_.fail_with = absl::NotFoundError("lost");
  absl::StatusOr<GenerateResult> r = Generate(Greedy(Compile(constrain::Kind::kRegex, "[bd]klm")));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->text, "bklm");
  EXPECT_GE(r->session_rebuilds, 1);
  EXPECT_THAT(log_, ::testing::Contains("send 1 +10,11,12"));  // the step that failed
}

// The vocabulary has no "j": after "b" nothing continues "bj". The
// generation ends with the matcher's error naming it (InvalidArgument: `llm`
// exits 2, the gateway answers 400), not with an empty mask sent to the
// model service.
TEST_F(ConstrainedLoopTest, AStateNoTokenContinuesEndsTheGeneration) {
  absl::StatusOr<GenerateResult> r = Generate(Greedy(Compile(constrain::Kind::kRegex, "bj")));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("the constraint allows no token after"))
      << r.status();
  EXPECT_TRUE(model_.prefills.empty());  // nothing was sent with an empty mask
}

// A constraint compiled for another vocabulary (its masks would be the
// wrong size): refused before any call.
TEST_F(ConstrainedLoopTest, AConstraintOfAnotherVocabularyIsRefused) {
  constrain::Vocabulary v;
  for (int32_t id = 0; id < kFakeVocab + 7; ++id) v.token_bytes.push_back(Letter(id % kFakeVocab));
  v.end_ids = {kFakeEos};
  std::unique_ptr<constrain::Compiler> other = *constrain::Compiler::Create(v);
  absl::StatusOr<std::shared_ptr<const constrain::Constraint>> c =
      other->Compile({.kind = constrain::Kind::kRegex, .text = "[bd]+"});
  ASSERT_TRUE(c.ok()) << c.status();
  absl::StatusOr<GenerateResult> r = Generate(Greedy(*c));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("compiled for a vocabulary of 23 tokens"));
  EXPECT_TRUE(model_.prefills.empty());
}

TEST_F(ConstrainedLoopTest, IgnoreEosAndAConstraintDoNotMix) {
  GenerateParams p = Greedy(Compile(constrain::Kind::kRegex, "b"));
  p.ignore_eos = true;
  EXPECT_EQ(Generate(p).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace llm::client
