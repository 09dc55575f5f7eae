// Token masks through the engine (AppendRequest::masks): each masked row is
// the unmasked row restricted to the allowed tokens (a Prefill's last row,
// every row of a speculative decode; a scored prompt's rows stay unmasked),
// a bad mask is INVALID_ARGUMENT and changes nothing, and lookahead works
// with masks: the guess is the masked argmax, and its raw row is encoded as
// the request that takes it asks, its mask included.
#include <algorithm>
#include <string>
#include <vector>

#include "common/token_mask.h"
#include "common/token_mask_testing.h"
#include "gtest/gtest.h"
#include "model_svc/engine/engine.h"
#include "model_svc/engine/engine_testing.h"

namespace llm::engine {
namespace {

using llm::testing::AllowedByLogit;
using llm::testing::AllowedLogSumExp;
using llm::testing::RandomTokenMask;
using llm::testing::Restricted;
using testing::MakeEngine;
using testing::Request;
using testing::Tokens;

constexpr int64_t kVocab = 300;  // engine_testing.h's model

// The unmasked float32 logits after `tokens`, on a session of their own.
std::vector<float> Reference(Engine& engine, const std::vector<int32_t>& tokens) {
  auto r = engine.Append(Request("", tokens));
  EXPECT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(engine.Release(r->session_id).ok());
  return r->logits.back().values;
}

// The first id of the largest allowed logit.
int32_t MaskedArgmax(const std::vector<float>& row, const TokenMask& mask) {
  return AllowedByLogit(row, mask, 1).front();
}

AppendRequest Decode(const std::string& session, int32_t token, bool lookahead,
                     std::vector<TokenMask> masks) {
  AppendRequest r = Request(session, {token});
  r.decode = true;
  r.lookahead = lookahead;
  r.masks = std::move(masks);
  return r;
}

TEST(EngineMaskTest, APrefillsLastRowIsMaskedInEveryEncoding) {
  auto engine = MakeEngine();
  const std::vector<int32_t> prompt = Tokens(9, 1);
  const std::vector<float> full = Reference(*engine, prompt);
  const TokenMask mask = RandomTokenMask(kVocab, 0.2, 1);
  AppendRequest f32 = Request("", prompt);
  f32.masks = {mask};
  auto r = engine->Append(std::move(f32));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->logits.back().values, Restricted(full, mask));
  EXPECT_NEAR(r->logits.back().log_sum_exp, AllowedLogSumExp(full, mask), 1e-5);

  AppendRequest top = Request("", prompt);
  top.logits = {model::LogitsEncoding::kTopN, 5};
  top.masks = {mask};
  r = engine->Append(std::move(top));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->logits.back().top_ids.size(), 5u);
  for (int32_t id : r->logits.back().top_ids) EXPECT_TRUE(mask.allowed(id)) << id;
  EXPECT_EQ(r->logits.back().top_ids[0], MaskedArgmax(full, mask));
  EXPECT_NEAR(r->logits.back().log_sum_exp, AllowedLogSumExp(full, mask), 1e-5);
}

TEST(EngineMaskTest, ScoredPromptRowsStayUnmasked) {
  auto engine = MakeEngine();
  const std::vector<int32_t> prompt = Tokens(6, 2);
  AppendRequest plain = Request("", prompt);
  plain.prompt_logprobs = 2;
  auto a = engine->Append(std::move(plain));
  ASSERT_TRUE(a.ok()) << a.status();
  const TokenMask mask = RandomTokenMask(kVocab, 0.1, 2);
  AppendRequest masked = Request("", prompt);
  masked.prompt_logprobs = 2;
  masked.masks = {mask};
  auto b = engine->Append(std::move(masked));
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ(a->logits.size(), prompt.size());
  ASSERT_EQ(b->logits.size(), prompt.size());
  for (size_t i = 0; i + 1 < prompt.size(); ++i) {
    EXPECT_EQ(b->logits[i].target_logit, a->logits[i].target_logit) << "row " << i;
    EXPECT_EQ(b->logits[i].top_ids, a->logits[i].top_ids) << "row " << i;
    EXPECT_EQ(b->logits[i].log_sum_exp, a->logits[i].log_sum_exp) << "row " << i;
  }
  EXPECT_EQ(b->logits.back().values, Restricted(a->logits.back().values, mask));
}

TEST(EngineMaskTest, ASpeculativeDecodeMasksEachRowWithItsOwn) {
  auto engine = MakeEngine();
  const std::vector<int32_t> prompt = Tokens(5, 3);
  auto s = engine->Append(Request("", prompt));
  ASSERT_TRUE(s.ok());
  const std::vector<int32_t> step = {11, 12, 13};  // the token and two proposals
  const std::vector<TokenMask> masks = {RandomTokenMask(kVocab, 0.5, 4),
                                        RandomTokenMask(kVocab, 0.05, 5),
                                        TokenMask::AllowAll(kVocab)};
  AppendRequest r = Request(s->session_id, step, /*all_logits=*/true);
  r.decode = true;
  r.proposed = 2;
  r.masks = masks;
  auto d = engine->Append(std::move(r));
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->logits.size(), 3u);
  std::vector<int32_t> history = prompt;
  for (int i = 0; i < 3; ++i) {
    history.push_back(step[i]);
    EXPECT_EQ(d->logits[i].values, Restricted(Reference(*engine, history), masks[i]))
        << "row " << i;
  }
}

TEST(EngineMaskTest, LookaheadGuessesTheMaskedArgmaxAndTakesTheNextMask) {
  auto engine = MakeEngine();
  const std::vector<int32_t> prompt = Tokens(7, 6);
  const int32_t t1 = 42;
  std::vector<int32_t> history = prompt;
  history.push_back(t1);
  const std::vector<float> after_t1 = Reference(*engine, history);
  // A mask without the unmasked argmax: the guess must be the masked one.
  TokenMask mask1 = RandomTokenMask(kVocab, 0.3, 7);
  mask1.Disallow(std::max_element(after_t1.begin(), after_t1.end()) - after_t1.begin());
  const int32_t t2 = MaskedArgmax(after_t1, mask1);
  history.push_back(t2);
  const std::vector<float> after_t2 = Reference(*engine, history);

  auto s = engine->Append(Request("", prompt));
  ASSERT_TRUE(s.ok());
  auto first = engine->Append(Decode(s->session_id, t1, /*lookahead=*/true, {mask1}));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(model::Argmax(first->logits.back()), t2);
  // The next request appends the guess with another mask and encoding: it
  // takes the guess's row, masked and encoded as it asks.
  const TokenMask mask2 = RandomTokenMask(kVocab, 0.1, 8);
  AppendRequest second = Decode(s->session_id, t2, /*lookahead=*/false, {mask2});
  second.logits = {model::LogitsEncoding::kTopN, 3};
  auto r = engine->Append(std::move(second));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(engine->Stats().lookahead_hits, 1);
  EXPECT_EQ(r->logits.back().top_ids, AllowedByLogit(after_t2, mask2, 3));
  EXPECT_NEAR(r->logits.back().log_sum_exp, AllowedLogSumExp(after_t2, mask2), 1e-5);
  ASSERT_TRUE(engine->Release(s->session_id).ok());
}

TEST(EngineMaskTest, ARawGuessServesAnUnmaskedRequestToo) {
  auto engine = MakeEngine();
  const std::vector<int32_t> prompt = Tokens(4, 9);
  auto s = engine->Append(Request("", prompt));
  ASSERT_TRUE(s.ok());
  auto first = engine->Append(Decode(s->session_id, 3, true, {RandomTokenMask(kVocab, 0.5, 10)}));
  ASSERT_TRUE(first.ok()) << first.status();
  const int32_t guess = model::Argmax(first->logits.back());
  auto second = engine->Append(Decode(s->session_id, guess, false, {}));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(engine->Stats().lookahead_hits, 1);
  std::vector<int32_t> history = prompt;
  history.insert(history.end(), {3, guess});
  EXPECT_EQ(second->logits.back().values, Reference(*engine, history));
}

TEST(EngineMaskTest, AnUnmaskedGuessIsNotTakenByAMaskedRequest) {
  auto engine = MakeEngine();
  const std::vector<int32_t> prompt = Tokens(4, 11);
  auto s = engine->Append(Request("", prompt));
  ASSERT_TRUE(s.ok());
  auto first = engine->Append(Decode(s->session_id, 3, true, {}));
  ASSERT_TRUE(first.ok()) << first.status();
  const int32_t guess = model::Argmax(first->logits.back());
  const TokenMask mask = RandomTokenMask(kVocab, 0.5, 12);
  auto second = engine->Append(Decode(s->session_id, guess, false, {mask}));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(engine->Stats().lookahead_hits, 0);  // its row was encoded unmasked
  std::vector<int32_t> history = prompt;
  history.insert(history.end(), {3, guess});
  EXPECT_EQ(second->logits.back().values, Restricted(Reference(*engine, history), mask));
}

TEST(EngineMaskTest, BadMasksAreInvalidAndChangeNothing) {
  auto engine = MakeEngine();
  auto s = engine->Append(Request("", Tokens(5, 13)));
  ASSERT_TRUE(s.ok());
  const std::string id = s->session_id;
  auto expect_invalid = [&](AppendRequest r, const std::string& what) {
    absl::StatusOr<AppendResult> got = engine->Append(std::move(r));
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument) << got.status();
    EXPECT_NE(std::string(got.status().message()).find(what), std::string::npos) << got.status();
  };
  expect_invalid(Decode(id, 1, false, {TokenMask::AllowAll(kVocab + 1)}),
                 "token mask 0 is of a vocabulary of 301 tokens, not the model's 300");
  expect_invalid(Decode(id, 1, false, {TokenMask::AllowNone(kVocab)}),
                 "token mask 0 allows no token");
  expect_invalid(Decode(id, 1, false, {TokenMask::AllowAll(kVocab), TokenMask::AllowAll(kVocab)}),
                 "2 token masks for 1 rows");
  ASSERT_EQ(engine->ListSessions().size(), 1u);
  EXPECT_EQ(engine->ListSessions()[0].num_tokens, 5);
  EXPECT_EQ(engine->ListSessions()[0].decoded_tokens, 0);
}

}  // namespace
}  // namespace llm::engine
