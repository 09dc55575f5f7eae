// Speculative decoding in the engine: a decode of the sampled token plus
// proposals returns the logits of every row, equal to those of one decode at
// a time; truncate_to rolls the session back first (dropping a lookahead
// guess as Truncate does); a bad request changes nothing.
#include <cstdint>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model_svc/engine/engine.h"
#include "model_svc/engine/engine_testing.h"

namespace llm::engine {
namespace {

using ::testing::HasSubstr;
using testing::MakeEngine;
using testing::Request;
using testing::Tokens;

AppendRequest Speculative(const std::string& session, std::vector<int32_t> tokens,
                          int64_t truncate_to = -1) {
  const int32_t proposed = static_cast<int32_t>(tokens.size()) - 1;
  AppendRequest r = Request(session, std::move(tokens), /*all_logits=*/true);
  r.proposed = proposed;
  r.decode = true;
  r.truncate_to = truncate_to;
  return r;
}

int64_t TokensOf(Engine& engine, const std::string& id) {
  for (const SessionInfo& s : engine.ListSessions()) {
    if (s.id == id) return s.num_tokens;
  }
  return -1;
}

// The logits after each of `tokens`, one prefill of all of them.
std::vector<model::Logits> EveryRow(Engine& engine, const std::vector<int32_t>& tokens) {
  auto r = engine.Append(Request("", tokens, /*all_logits=*/true));
  EXPECT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(engine.Release(r->session_id).ok());
  return r->logits;
}

TEST(EngineSpeculationTest, ProposedRowsEqualDecodingOneAtATime) {
  auto engine = MakeEngine();
  const std::vector<int32_t> prompt = Tokens(9, 11);
  const std::vector<int32_t> more = Tokens(5, 12);  // sampled + 4 proposed
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), more.begin(), more.end());
  const std::vector<model::Logits> reference = EveryRow(*engine, all);

  auto s = engine->Append(Request("", prompt));
  ASSERT_TRUE(s.ok()) << s.status();
  auto r = engine->Append(Speculative(s->session_id, more));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->num_tokens, 14);
  ASSERT_EQ(r->logits.size(), 5u);
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(r->logits[i].values, reference[9 + i].values) << i;
  const EngineStats stats = engine->Stats();
  EXPECT_EQ(stats.decode_tokens, 5);  // every appended token counts as decoded
  EXPECT_EQ(engine->ListSessions()[0].decoded_tokens, 5);
}

TEST(EngineSpeculationTest, TruncateToDropsRejectedProposalsBeforeAppending) {
  auto engine = MakeEngine();
  const std::vector<int32_t> prompt = Tokens(7, 13);
  auto s = engine->Append(Request("", prompt));
  ASSERT_TRUE(s.ok()) << s.status();
  const std::string id = s->session_id;
  // Sampled 5, proposed 6 7 8; the client accepts 6 only and samples 20.
  ASSERT_TRUE(engine->Append(Speculative(id, {5, 6, 7, 8})).ok());
  EXPECT_EQ(TokensOf(*engine, id), 11);
  auto r = engine->Append(Speculative(id, {20, 21}, /*truncate_to=*/9));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->num_tokens, 11);
  std::vector<int32_t> kept = prompt;
  kept.insert(kept.end(), {5, 6, 20, 21});
  const std::vector<model::Logits> reference = EveryRow(*engine, kept);
  ASSERT_EQ(r->logits.size(), 2u);
  EXPECT_EQ(r->logits[0].values, reference[9].values);
  EXPECT_EQ(r->logits[1].values, reference[10].values);
  // truncate_to equal to the length keeps everything.
  r = engine->Append(Speculative(id, {22}, /*truncate_to=*/11));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->num_tokens, 12);
  EXPECT_EQ(engine->Stats().proposed_tokens, 3 + 1);
  EXPECT_EQ(engine->Stats().rolled_back_tokens, 2);  // 7 and 8
}

TEST(EngineSpeculationTest, TruncateToDropsALookaheadGuessFirst) {
  auto engine = MakeEngine();
  const std::vector<int32_t> prompt = Tokens(6, 14);
  auto s = engine->Append(Request("", prompt));
  ASSERT_TRUE(s.ok()) << s.status();
  const std::string id = s->session_id;
  AppendRequest first = Speculative(id, {3, 4, 5});
  first.lookahead = true;  // a guess after the last proposed row
  ASSERT_TRUE(engine->Append(std::move(first)).ok());
  // Accept 4, reject 5; the guess (if computed) goes with it.
  auto r = engine->Append(Speculative(id, {30}, /*truncate_to=*/8));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->num_tokens, 9);
  std::vector<int32_t> kept = prompt;
  kept.insert(kept.end(), {3, 4, 30});
  EXPECT_EQ(r->logits.back().values, EveryRow(*engine, kept).back().values);
  EXPECT_EQ(engine->Stats().lookahead_hits, 0);
}

// A decode without proposals asks for a lookahead guess; the next decode
// sends the guessed token with proposals: it takes the guess's row as its
// first and computes the proposals' rows, as decoding one at a time would.
TEST(EngineSpeculationTest, ASpeculativeDecodeTakesTheLookaheadGuess) {
  auto engine = MakeEngine();
  const std::vector<int32_t> prompt = Tokens(6, 15);
  auto s = engine->Append(Request("", prompt));
  ASSERT_TRUE(s.ok()) << s.status();
  const std::string id = s->session_id;
  const int32_t t1 = model::Argmax(s->logits.back());
  AppendRequest plain = Request(id, {t1});
  plain.decode = true;
  plain.lookahead = true;
  auto d = engine->Append(std::move(plain));
  ASSERT_TRUE(d.ok()) << d.status();
  const int32_t t2 = model::Argmax(d->logits.back());
  auto r = engine->Append(Speculative(id, {t2, 7, 8}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->num_tokens, 10);
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), {t1, t2, 7, 8});
  const std::vector<model::Logits> reference = EveryRow(*engine, all);
  ASSERT_EQ(r->logits.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(r->logits[i].values, reference[7 + i].values) << i;
  EXPECT_EQ(engine->Stats().lookahead_hits, 1);
}

TEST(EngineSpeculationTest, BadRequestsAreInvalidAndChangeNothing) {
  auto engine = MakeEngine();
  auto s = engine->Append(Request("", Tokens(5, 15)));
  ASSERT_TRUE(s.ok()) << s.status();
  const std::string id = s->session_id;

  auto past = engine->Append(Speculative(id, {1, 2}, /*truncate_to=*/6));
  EXPECT_EQ(past.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(past.status().message(), HasSubstr("past the session's length of 5"));
  auto bad_id = engine->Append(Speculative(id, {1, 1 << 20}, /*truncate_to=*/2));
  EXPECT_EQ(bad_id.status().code(), absl::StatusCode::kInvalidArgument);
  auto no_session = engine->Append(Speculative("", {1, 2}, /*truncate_to=*/0));
  EXPECT_EQ(no_session.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TokensOf(*engine, id), 5);
  EXPECT_EQ(engine->ListSessions().size(), 1u);

  // The session is intact and usable.
  auto r = engine->Append(Speculative(id, {1, 2}, /*truncate_to=*/5));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->num_tokens, 7);
}

}  // namespace
}  // namespace llm::engine
