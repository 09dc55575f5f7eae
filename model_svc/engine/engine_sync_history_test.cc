// AppendRequest::sync_history (named sessions): the request carries the
// session's whole history; the engine keeps the common prefix, rolls back
// the rest, computes only the remainder (at least the last token), and
// creates the session under its name. Each result's logits equal a fresh
// prefill of the same history, bit for bit (the CPU kernels are batch
// invariant: engine_test.cc).
#include <cstdint>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model_svc/engine/engine.h"
#include "model_svc/engine/engine_testing.h"

namespace llm::engine {
namespace {

using testing::EngineSetup;
using ::testing::HasSubstr;
using testing::MakeEngine;
using testing::MakeGatedEngine;
using testing::Request;
using testing::StepGate;
using testing::Tokens;

AppendRequest Sync(const std::string& name, std::vector<int32_t> history) {
  AppendRequest r = Request(name, std::move(history));
  r.sync_history = true;
  return r;
}

// The last token's logits of a fresh session holding `history`.
std::vector<float> Fresh(Engine& engine, const std::vector<int32_t>& history) {
  auto r = engine.Append(Request("", history));
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return {};
  EXPECT_TRUE(engine.Release(r->session_id).ok());
  return r->logits.back().values;
}

int64_t Prefilled(const Engine& engine, const std::string& id) {
  for (const SessionInfo& s : engine.ListSessions()) {
    if (s.id == id) return s.prefilled_tokens;
  }
  return -1;
}

class SyncHistoryTest : public ::testing::TestWithParam<bool> {
 protected:
  std::unique_ptr<Engine> MakeIt() {
    EngineSetup setup;
    setup.prefix_cache = GetParam();
    return MakeEngine(setup);
  }
};

TEST_P(SyncHistoryTest, CreatesTheSessionUnderItsNameThenComputesOnlyWhatIsNew) {
  auto engine = MakeIt();
  const std::vector<int32_t> history = Tokens(27, 3);
  const std::vector<int32_t> turn1(history.begin(), history.begin() + 18);

  auto first = engine->Append(Sync("conv-a1", turn1));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->session_id, "conv-a1");
  EXPECT_EQ(first->kept_tokens, 0);
  EXPECT_EQ(first->num_tokens, 18);
  EXPECT_EQ(Prefilled(*engine, "conv-a1"), 18);

  auto second = engine->Append(Sync("conv-a1", history));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->kept_tokens, 18);
  EXPECT_EQ(second->num_tokens, 27);
  EXPECT_EQ(Prefilled(*engine, "conv-a1"), 27);  // 9 computed, not 27 again
  EXPECT_EQ(second->logits.back().values, Fresh(*engine, history));
}

TEST_P(SyncHistoryTest, SameHistoryAgainRecomputesOnlyTheLastToken) {
  auto engine = MakeIt();
  const std::vector<int32_t> history = Tokens(13, 4);
  ASSERT_TRUE(engine->Append(Sync("same", history)).ok());
  auto again = engine->Append(Sync("same", history));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->kept_tokens, 12);
  EXPECT_EQ(again->num_tokens, 13);
  EXPECT_EQ(again->logits.back().values, Fresh(*engine, history));
}

TEST_P(SyncHistoryTest, DivergingHistoryRollsBackToTheCommonPrefix) {
  auto engine = MakeIt();
  std::vector<int32_t> history = Tokens(20, 5);
  ASSERT_TRUE(engine->Append(Sync("div", history)).ok());
  // Same first 11 tokens, then others (an edited or regenerated turn).
  std::vector<int32_t> edited(history.begin(), history.begin() + 11);
  for (int32_t t : Tokens(6, 6)) edited.push_back(t + 1 == history[edited.size()] ? t + 2 : t + 1);
  auto r = engine->Append(Sync("div", edited));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->kept_tokens, 11);
  EXPECT_EQ(r->num_tokens, 17);
  EXPECT_EQ(r->logits.back().values, Fresh(*engine, edited));
  // A shorter history inside the session's: kept all but its last token.
  const std::vector<int32_t> shorter(edited.begin(), edited.begin() + 8);
  auto s = engine->Append(Sync("div", shorter));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->kept_tokens, 7);
  EXPECT_EQ(s->num_tokens, 8);
  EXPECT_EQ(s->logits.back().values, Fresh(*engine, shorter));
}

TEST_P(SyncHistoryTest, AfterDecodesAndAGuessTheHistoryStillMatches) {
  auto engine = MakeIt();
  const std::vector<int32_t> prompt = Tokens(10, 8);
  auto p = engine->Append(Sync("dec", prompt));
  ASSERT_TRUE(p.ok()) << p.status();
  std::vector<int32_t> history = prompt;
  for (int i = 0; i < 3; ++i) {
    AppendRequest d = Request("dec", {static_cast<int32_t>(40 + i)});
    d.decode = true;
    d.lookahead = true;  // leaves a guess behind the last one
    ASSERT_TRUE(engine->Append(std::move(d)).ok());
    history.push_back(40 + i);
  }
  history.push_back(7);  // the next turn's token: not the guess, or the guess
  auto r = engine->Append(Sync("dec", history));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->kept_tokens, 13);
  EXPECT_EQ(r->num_tokens, 14);
  EXPECT_EQ(r->logits.back().values, Fresh(*engine, history));
}

// A history that goes on with the lookahead guess of the session's last
// request takes the guess's logits (nothing rolled back, nothing computed
// again).
TEST_P(SyncHistoryTest, AHistoryThatAppendsTheGuessTakesIt) {
  auto engine = MakeIt();
  std::vector<int32_t> history = Tokens(12, 10);
  AppendRequest first = Sync("guess", history);
  first.lookahead = true;
  auto r = engine->Append(std::move(first));
  ASSERT_TRUE(r.ok()) << r.status();
  history.push_back(model::Argmax(r->logits.back()));
  const int64_t hits = engine->Stats().lookahead_hits;
  auto next = engine->Append(Sync("guess", history));
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->kept_tokens, 12);
  EXPECT_EQ(engine->Stats().lookahead_hits, hits + 1);
  EXPECT_EQ(next->logits.back().values, Fresh(*engine, history));
}

INSTANTIATE_TEST_SUITE_P(PrefixCache, SyncHistoryTest, ::testing::Bool());

TEST(SyncHistoryErrorsTest, NeedsANameAndNoTruncateToOrScoring) {
  auto engine = MakeEngine();
  EXPECT_THAT(engine->Append(Sync("", {1, 2})).status().message(), HasSubstr("session_id"));
  AppendRequest t = Sync("n", {1, 2});
  t.truncate_to = 0;
  EXPECT_EQ(engine->Append(std::move(t)).status().code(), absl::StatusCode::kInvalidArgument);
  AppendRequest scored = Sync("n", {1, 2});
  scored.prompt_logprobs = 0;
  EXPECT_EQ(engine->Append(std::move(scored)).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(engine->ListSessions().empty());
}

TEST(SyncHistoryErrorsTest, BusySessionIsAborted) {
  StepGate gate;
  auto engine = MakeGatedEngine(gate);
  ASSERT_TRUE(engine->Append(Sync("busy", {1, 2, 3})).ok());
  gate.Close();
  absl::Notification done;
  engine->Submit(Sync("busy", Tokens(20, 9)), [&](absl::StatusOr<AppendResult>) { done.Notify(); });
  EXPECT_EQ(engine->Append(Sync("busy", {1, 2, 3, 4})).status().code(), absl::StatusCode::kAborted);
  gate.Open();
  done.WaitForNotification();
}

}  // namespace
}  // namespace llm::engine
