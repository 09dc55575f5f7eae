// The engine's lookahead (AppendRequest::lookahead): a guessed step gives
// exactly the logits the caller's request would have computed, whether the
// request arrives before the guess is computed, after, or with another
// token; and the guess is invisible (counts, Truncate, Fork, Release, KV
// space) until a request appends it.
#include <atomic>
#include <functional>
#include <random>
#include <thread>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "model_svc/engine/engine.h"
#include "model_svc/engine/engine_testing.h"

namespace llm::engine {
namespace {

using testing::EngineSetup;
using testing::MakeEngine;
using testing::MakeGatedEngine;
using testing::Request;
using testing::StepGate;
using testing::Tokens;

AppendRequest Decode(const std::string& session, int32_t token, bool lookahead) {
  AppendRequest r = Request(session, {token});
  r.decode = true;
  r.lookahead = lookahead;
  return r;
}

// The logits of `prompt` followed by `decodes`, computed without lookahead
// on a fresh session of `engine`.
model::Logits Reference(Engine& engine, const std::vector<int32_t>& prompt,
                        const std::vector<int32_t>& decodes) {
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), decodes.begin(), decodes.end());
  auto r = engine.Append(Request("", all));
  EXPECT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(engine.Release(r->session_id).ok());
  return r->logits.back();
}

// Waits until the step loop has nothing queued or running.
void AwaitQuiet(Engine& engine) {
  for (int i = 0; i < 5000; ++i) {
    const EngineStats s = engine.Stats();
    if (s.running == 0 && s.waiting == 0) return;
    absl::SleepFor(absl::Milliseconds(1));
  }
  FAIL() << "the step loop did not go quiet";
}

int64_t TokensOf(Engine& engine, const std::string& id) {
  for (const SessionInfo& s : engine.ListSessions()) {
    if (s.id == id) return s.num_tokens;
  }
  return -1;
}

TEST(EngineLookaheadTest, GreedyDecodeGivesTheSameLogitsAsWithout) {
  auto engine = MakeEngine();
  const std::vector<int32_t> prompt = Tokens(9, 1);
  auto with = engine->Append(Request("", prompt));
  auto without = engine->Append(Request("", prompt));
  ASSERT_TRUE(with.ok() && without.ok());
  model::Logits a = with->logits.back(), b = without->logits.back();
  for (int i = 0; i < 12; ++i) {
    const int32_t token = model::Argmax(a);
    ASSERT_EQ(token, model::Argmax(b));
    auto ra = engine->Append(Decode(with->session_id, token, /*lookahead=*/true));
    auto rb = engine->Append(Decode(without->session_id, token, /*lookahead=*/false));
    ASSERT_TRUE(ra.ok()) << ra.status();
    ASSERT_TRUE(rb.ok()) << rb.status();
    EXPECT_EQ(ra->num_tokens, 10 + i);
    EXPECT_EQ(ra->logits.back().values, rb->logits.back().values) << "step " << i;
    a = ra->logits.back();
    b = rb->logits.back();
  }
  AwaitQuiet(*engine);
  const EngineStats stats = engine->Stats();
  EXPECT_EQ(stats.lookahead_steps, 12);
  EXPECT_EQ(stats.lookahead_hits, 11);
  // The last guess is not the caller's.
  EXPECT_EQ(TokensOf(*engine, with->session_id), 21);
  for (const SessionInfo& s : engine->ListSessions()) {
    EXPECT_EQ(s.decoded_tokens, 12);
    EXPECT_FALSE(s.busy);
  }
}

// Prefills `prompt` on a new session, decodes its argmax with lookahead and
// returns with the guess's step held at the closed gate.
AppendResult DecodeAndHoldTheGuess(Engine& engine, StepGate& gate,
                                   const std::vector<int32_t>& prompt) {
  gate.Open();
  auto s = engine.Append(Request("", prompt));
  EXPECT_TRUE(s.ok()) << s.status();
  gate.Close();
  absl::StatusOr<AppendResult> first;
  absl::Notification done;
  engine.Submit(Decode(s->session_id, model::Argmax(s->logits.back()), true),
                [&](absl::StatusOr<AppendResult> r) {
                  first = std::move(r);
                  done.Notify();
                });
  gate.Allow(1);         // the decode's step
  gate.AwaitArrival(2);  // the guess's step, held
  done.WaitForNotification();
  EXPECT_TRUE(first.ok()) << first.status();
  return *std::move(first);
}

TEST(EngineLookaheadTest, RequestArrivingDuringTheGuessWaitsForIt) {
  StepGate gate;
  auto engine = MakeGatedEngine(gate);
  const std::vector<int32_t> prompt = Tokens(6, 2);
  const int32_t t1 = model::Argmax(Reference(*engine, prompt, {}));  // what the helper decodes
  for (bool right : {true, false}) {
    SCOPED_TRACE(right ? "the guessed token" : "another token");
    const AppendResult first = DecodeAndHoldTheGuess(*engine, gate, prompt);
    const std::string& id = first.session_id;
    EXPECT_EQ(TokensOf(*engine, id), 7);
    const int32_t guess = model::Argmax(first.logits.back());
    const int32_t t2 = right ? guess : (guess + 1) % 300;
    absl::StatusOr<AppendResult> second;
    absl::Notification second_done;
    engine->Submit(Decode(id, t2, false), [&](absl::StatusOr<AppendResult> r) {
      second = std::move(r);
      second_done.Notify();
    });
    EXPECT_FALSE(second_done.HasBeenNotified());
    // One call at a time: a third is refused as before.
    EXPECT_EQ(engine->Append(Decode(id, 5, false)).status().code(), absl::StatusCode::kAborted);
    gate.Open();
    second_done.WaitForNotification();
    ASSERT_TRUE(second.ok()) << second.status();
    EXPECT_EQ(second->num_tokens, 8);
    EXPECT_EQ(second->logits.back().values, Reference(*engine, prompt, {t1, t2}).values);
    EXPECT_EQ(engine->Stats().lookahead_hits, 1);  // the first case's
    ASSERT_TRUE(engine->Release(id).ok());
  }
}

TEST(EngineLookaheadTest, RequestArrivingAfterTheGuessIsAnsweredAtOnce) {
  auto engine = MakeEngine();
  const std::vector<int32_t> prompt = Tokens(5, 3);
  auto s = engine->Append(Request("", prompt));
  ASSERT_TRUE(s.ok());
  const int32_t t1 = model::Argmax(s->logits.back());
  auto first = engine->Append(Decode(s->session_id, t1, true));
  ASSERT_TRUE(first.ok());
  AwaitQuiet(*engine);
  const int32_t t2 = model::Argmax(first->logits.back());
  bool answered = false;
  absl::StatusOr<AppendResult> second;
  engine->Submit(Decode(s->session_id, t2, false), [&](absl::StatusOr<AppendResult> r) {
    second = std::move(r);
    answered = true;
  });
  EXPECT_TRUE(answered);  // inline: the guess was computed
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->num_tokens, 7);
  EXPECT_EQ(second->logits.back().values, Reference(*engine, prompt, {t1, t2}).values);
  EXPECT_EQ(engine->Stats().lookahead_hits, 1);
  EXPECT_EQ(engine->ListSessions()[0].decoded_tokens, 2);
}

TEST(EngineLookaheadTest, AComputedGuessIsDroppedByAnythingElse) {
  auto engine = MakeEngine();
  const std::vector<int32_t> prompt = Tokens(7, 4);
  auto s = engine->Append(Request("", prompt));
  ASSERT_TRUE(s.ok());
  const std::string id = s->session_id;
  const int32_t t1 = model::Argmax(s->logits.back());
  auto guessed = [&]() {
    auto r = engine->Append(Decode(id, t1, true));
    EXPECT_TRUE(r.ok()) << r.status();
    AwaitQuiet(*engine);
    EXPECT_EQ(TokensOf(*engine, id), 8);
    return r.ok() ? model::Argmax(r->logits.back()) : -1;
  };
  auto reset = [&]() { ASSERT_TRUE(engine->Truncate(id, 7).ok()); };

  // Another token.
  int32_t guess = guessed();
  auto other = engine->Append(Decode(id, (guess + 7) % 300, false));
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->num_tokens, 9);
  EXPECT_EQ(other->logits.back().values,
            Reference(*engine, prompt, {t1, (guess + 7) % 300}).values);
  reset();

  // The same token with another logits encoding: recomputed.
  guess = guessed();
  AppendRequest top = Decode(id, guess, false);
  top.logits = {model::LogitsEncoding::kTopN, 3};
  auto topn = engine->Append(std::move(top));
  ASSERT_TRUE(topn.ok());
  ASSERT_EQ(topn->logits.back().top_ids.size(), 3u);
  EXPECT_EQ(topn->logits.back().top_ids[0], model::Argmax(Reference(*engine, prompt, {t1, guess})));
  reset();

  // A prefill that starts with the guess keeps it and computes the rest.
  guess = guessed();
  auto prefill = engine->Append(Request(id, {guess, 11, 12}));
  ASSERT_TRUE(prefill.ok());
  EXPECT_EQ(prefill->num_tokens, 11);
  EXPECT_EQ(prefill->logits.back().values, Reference(*engine, prompt, {t1, guess, 11, 12}).values);
  reset();

  // Truncate counts only the caller's tokens.
  guessed();
  EXPECT_EQ(engine->Truncate(id, 9).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(engine->Truncate(id, 8).ok());
  EXPECT_EQ(TokensOf(*engine, id), 8);
  reset();

  // Fork copies only the caller's tokens.
  guessed();
  auto child = engine->Fork(id);
  ASSERT_TRUE(child.ok()) << child.status();
  EXPECT_EQ(TokensOf(*engine, *child), 8);
  auto next = engine->Append(Decode(*child, 42, false));
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->logits.back().values, Reference(*engine, prompt, {t1, 42}).values);
  ASSERT_TRUE(engine->Release(*child).ok());

  ASSERT_TRUE(engine->Release(id).ok());
  EXPECT_EQ(engine->Stats().kv_blocks_free, engine->Stats().kv_blocks_total);
  EXPECT_EQ(engine->Stats().lookahead_hits, 1);  // the prefill's first token
}

TEST(EngineLookaheadTest, TruncateWaitsForARunningGuess) {
  StepGate gate;
  auto engine = MakeGatedEngine(gate);
  const AppendResult first = DecodeAndHoldTheGuess(*engine, gate, Tokens(6, 5));
  std::atomic<bool> truncated{false};
  absl::Status status;
  std::thread t([&] {
    status = engine->Truncate(first.session_id, 7);
    truncated = true;
  });
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_FALSE(truncated);  // waiting for the guess's step to end
  gate.Open();
  t.join();
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(TokensOf(*engine, first.session_id), 7);
  EXPECT_EQ(engine->ListSessions()[0].kv_blocks, 2);  // 7 positions, 4 a block
}

TEST(EngineLookaheadTest, TruncateAndForkDuringARunningGuessReturnAtOnceAndAnswerAfterIt) {
  StepGate gate;
  auto engine = MakeGatedEngine(gate);
  const AppendResult first = DecodeAndHoldTheGuess(*engine, gate, Tokens(6, 7));
  absl::Notification forked, truncated;
  absl::StatusOr<std::string> child;
  absl::Status truncate;
  // Both return with the step held: the calls wait in the loop's queue.
  engine->ForkAsync(first.session_id, [&](absl::StatusOr<std::string> id) {
    child = std::move(id);
    forked.Notify();
  });
  engine->TruncateAsync(first.session_id, 6, [&](absl::Status s) {
    truncate = s;
    truncated.Notify();
  });
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_FALSE(forked.HasBeenNotified());
  EXPECT_FALSE(truncated.HasBeenNotified());
  gate.Open();
  forked.WaitForNotification();
  truncated.WaitForNotification();
  ASSERT_TRUE(child.ok()) << child.status();
  EXPECT_TRUE(truncate.ok()) << truncate;
  EXPECT_EQ(TokensOf(*engine, *child), 7);  // the guess is not the child's
  EXPECT_EQ(TokensOf(*engine, first.session_id), 6);
  ASSERT_TRUE(engine->Release(*child).ok());
  ASSERT_TRUE(engine->Release(first.session_id).ok());
  EXPECT_EQ(engine->Stats().kv_blocks_free, engine->Stats().kv_blocks_total);
}

TEST(EngineLookaheadTest, ReleaseDuringTheGuessFreesEverything) {
  StepGate gate;
  auto engine = MakeGatedEngine(gate);
  const AppendResult first = DecodeAndHoldTheGuess(*engine, gate, Tokens(6, 6));
  // The caller's next request waits for the guess; then the session goes.
  absl::Notification follower_done;
  absl::Status follower;
  engine->Submit(Decode(first.session_id, model::Argmax(first.logits.back()), true),
                 [&](absl::StatusOr<AppendResult> r) {
                   follower = r.status();
                   follower_done.Notify();
                 });
  ASSERT_TRUE(engine->Release(first.session_id).ok());
  gate.Open();
  follower_done.WaitForNotification();
  EXPECT_EQ(follower.code(), absl::StatusCode::kCancelled);
  AwaitQuiet(*engine);
  EXPECT_EQ(engine->Stats().sessions, 0);
  EXPECT_EQ(engine->Stats().kv_blocks_free, engine->Stats().kv_blocks_total);
}

TEST(EngineLookaheadTest, CancellingTheCallStopsItsGuess) {
  auto engine = MakeEngine();
  auto s = engine->Append(Request("", Tokens(3, 9)));
  ASSERT_TRUE(s.ok());
  AppendRequest d = Decode(s->session_id, 1, true);
  const CancelFlag cancel = std::make_shared<std::atomic<bool>>(false);
  d.cancel = cancel;
  absl::Notification done;
  // The guess is queued before this callback runs, and shares the call's
  // flag: cancelling now stops it before its step.
  engine->Submit(std::move(d), [&](absl::StatusOr<AppendResult> r) {
    EXPECT_TRUE(r.ok()) << r.status();
    cancel->store(true);
    done.Notify();
  });
  done.WaitForNotification();
  AwaitQuiet(*engine);
  EXPECT_EQ(engine->Stats().lookahead_steps, 1);
  EXPECT_EQ(TokensOf(*engine, s->session_id), 4);
  EXPECT_EQ(engine->ListSessions()[0].kv_blocks, 1);  // no block for a fifth position
  auto next = engine->Append(Decode(s->session_id, 2, false));
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->num_tokens, 5);
  EXPECT_EQ(engine->Stats().lookahead_hits, 0);
}

TEST(EngineLookaheadTest, AGuessNeverEvictsASession) {
  EngineSetup setup;
  setup.kv_blocks = 3;  // 12 positions
  auto engine = MakeEngine(setup);
  auto a = engine->Append(Request("", Tokens(4, 7)));
  auto b = engine->Append(Request("", Tokens(4, 8)));
  ASSERT_TRUE(a.ok() && b.ok());
  // a's decodes fill positions 4..7 (the third block); the guess after the
  // last would need a fourth block, which only evicting b could free.
  model::Logits last = a->logits.back();
  for (int i = 0; i < 4; ++i) {
    auto r = engine->Append(Decode(a->session_id, model::Argmax(last), true));
    ASSERT_TRUE(r.ok()) << r.status();
    last = r->logits.back();
  }
  AwaitQuiet(*engine);
  EXPECT_EQ(engine->Stats().evicted_sessions, 0);
  EXPECT_EQ(TokensOf(*engine, b->session_id), 4);
  EXPECT_EQ(TokensOf(*engine, a->session_id), 8);
  EXPECT_EQ(engine->Stats().lookahead_hits, 3);
  EXPECT_EQ(engine->Stats().kv_blocks_free, 0);
}

// A session whose only work is a guess (here in the step being computed)
// is not busy for its caller: at the session limit it gives way to a new
// session, freed once the guess's step ends.
TEST(EngineLookaheadTest, ASessionWithAGuessInStepGivesWayAtTheSessionLimit) {
  StepGate gate;
  EngineSetup setup;
  setup.max_sessions = 1;
  auto engine = MakeGatedEngine(gate, setup);
  auto a = engine->Append(Request("", Tokens(3, 13)));
  ASSERT_TRUE(a.ok());
  gate.Close();
  absl::Notification decoded;
  engine->Submit(Decode(a->session_id, model::Argmax(a->logits.back()), true),
                 [&](absl::StatusOr<AppendResult> r) {
                   EXPECT_TRUE(r.ok()) << r.status();
                   decoded.Notify();
                 });
  gate.AwaitArrival();  // the decode's step
  gate.Allow(1);
  decoded.WaitForNotification();
  gate.AwaitArrival(2);  // the guess's step, planned and held
  ASSERT_EQ(engine->Stats().running, 1);
  absl::Notification created;
  absl::StatusOr<AppendResult> b;
  engine->Submit(Request("", Tokens(2, 14)), [&](absl::StatusOr<AppendResult> r) {
    b = std::move(r);
    created.Notify();
  });
  gate.Open();
  created.WaitForNotification();
  ASSERT_TRUE(b.ok()) << b.status();
  AwaitQuiet(*engine);
  EXPECT_EQ(engine->Append(Request(a->session_id, {1})).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(engine->Stats().evicted_for_session_limit, 1);
  EXPECT_EQ(engine->Stats().sessions, 1);
  EXPECT_EQ(engine->ListSessions()[0].id, b->session_id);
  EXPECT_EQ(engine->Stats().kv_blocks_free, engine->Stats().kv_blocks_total - 1);
}

// Decodes t1 with lookahead; its completion callback (on the step loop,
// after the guess is queued and before the next step is scheduled) sends
// next_token(t1's logits) without lookahead. Returns that second call's
// result, and its token in *t2.
absl::StatusOr<AppendResult> DecodeThenSendFromTheCallback(
    Engine& engine, const std::string& session, int32_t t1,
    const std::function<int32_t(const model::Logits&)>& next_token, int32_t* t2) {
  absl::Notification done;
  absl::StatusOr<AppendResult> second;
  engine.Submit(Decode(session, t1, true), [&](absl::StatusOr<AppendResult> first) {
    ASSERT_TRUE(first.ok()) << first.status();
    *t2 = next_token(first->logits.back());
    engine.Submit(Decode(session, *t2, false), [&](absl::StatusOr<AppendResult> r) {
      second = std::move(r);
      done.Notify();
    });
  });
  done.WaitForNotification();
  return second;
}

// A guess that finds no free KV block is dropped, not run, even with the
// caller's next request already waiting on it: that request then runs as
// usual (and may evict an idle session, as any request may).
TEST(EngineLookaheadTest, AGuessDroppedForKvSpaceResumesItsFollower) {
  EngineSetup setup;
  setup.kv_blocks = 2;  // 8 positions
  auto engine = MakeEngine(setup);
  const std::vector<int32_t> prompt = Tokens(3, 10);
  auto a = engine->Append(Request("", prompt));
  auto b = engine->Append(Request("", Tokens(4, 11)));
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(engine->Stats().kv_blocks_free, 0);
  // a's decode fills position 3, the last of its block; its guess (position
  // 4) would need a third block. The decode's callback, on the step loop
  // before the guess is scheduled, sends the guessed token.
  const int32_t t1 = model::Argmax(a->logits.back());
  int32_t t2 = -1;
  auto second = DecodeThenSendFromTheCallback(
      *engine, a->session_id, t1, [](const model::Logits& l) { return model::Argmax(l); }, &t2);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->num_tokens, 5);
  EXPECT_EQ(engine->Stats().lookahead_steps, 1);
  EXPECT_EQ(engine->Stats().lookahead_hits, 0);
  EXPECT_EQ(engine->Stats().evicted_sessions, 1);  // b, for the request, not the guess
  EXPECT_EQ(second->logits.back().values, Reference(*engine, prompt, {t1, t2}).values);
}

// A request with another token than a guess still queued drops the guess at
// once instead of waiting for its step.
TEST(EngineLookaheadTest, AnotherTokenDropsAQueuedGuessWithoutRunningIt) {
  auto engine = MakeEngine();
  const std::vector<int32_t> prompt = Tokens(5, 12);
  auto a = engine->Append(Request("", prompt));
  ASSERT_TRUE(a.ok());
  const int32_t t1 = model::Argmax(a->logits.back());
  int32_t t2 = -1;
  auto second = DecodeThenSendFromTheCallback(
      *engine, a->session_id, t1,
      [](const model::Logits& l) { return (model::Argmax(l) + 1) % 300; }, &t2);
  ASSERT_TRUE(second.ok()) << second.status();
  const int64_t steps = engine->Stats().steps;
  EXPECT_EQ(steps, 3);  // the prefill, t1, t2: the guess never ran
  EXPECT_EQ(second->logits.back().values, Reference(*engine, prompt, {t1, t2}).values);
}

// Several sessions at once, each a random mix of guessed and other tokens,
// truncations, forks and prefills, all with lookahead: every result equals a
// fresh computation of the session's history, and no block leaks.
TEST(EngineLookaheadTest, RandomMixOfCallsMatchesFreshComputation) {
  auto engine = MakeEngine();
  constexpr int kSessions = 4, kSteps = 40;
  std::vector<std::thread> threads;
  for (int t = 0; t < kSessions; ++t) {
    threads.emplace_back([&engine, t] {
      std::mt19937 rng(100 + t);
      std::vector<int32_t> history = Tokens(3 + t, 50 + t);
      auto first = engine->Append(Request("", history));
      ASSERT_TRUE(first.ok()) << first.status();
      std::string id = first->session_id;
      model::Logits last = first->logits.back();
      for (int step = 0; step < kSteps; ++step) {
        const int action = static_cast<int>(rng() % 20);
        std::vector<int32_t> tokens;
        if (action < 12) {
          tokens = {model::Argmax(last)};  // the guess
        } else if (action < 15) {
          tokens = {static_cast<int32_t>(rng() % 300)};  // probably not
        } else if (action < 17) {
          tokens = {model::Argmax(last), static_cast<int32_t>(rng() % 300)};  // a prefill
        } else if (action < 19) {
          const int64_t keep = 1 + static_cast<int64_t>(rng() % history.size());
          ASSERT_TRUE(engine->Truncate(id, keep).ok());
          history.resize(keep);
          tokens = {static_cast<int32_t>(rng() % 300)};
        } else {
          auto child = engine->Fork(id);
          ASSERT_TRUE(child.ok()) << child.status();
          ASSERT_TRUE(engine->Release(id).ok());
          id = *child;
          tokens = {static_cast<int32_t>(rng() % 300)};
        }
        if (history.size() + tokens.size() + 1 >= 256) break;  // the context
        AppendRequest r = Request(id, tokens);
        r.decode = tokens.size() == 1;
        r.lookahead = true;
        auto result = engine->Append(std::move(r));
        ASSERT_TRUE(result.ok()) << result.status();
        history.insert(history.end(), tokens.begin(), tokens.end());
        ASSERT_EQ(result->num_tokens, static_cast<int64_t>(history.size()));
        ASSERT_EQ(result->logits.back().values, Reference(*engine, history, {}).values)
            << "session " << t << ", step " << step << ", action " << action;
        last = result->logits.back();
      }
      ASSERT_TRUE(engine->Release(id).ok());
    });
  }
  for (std::thread& th : threads) th.join();
  AwaitQuiet(*engine);
  EXPECT_EQ(engine->Stats().sessions, 0);
  EXPECT_EQ(engine->Stats().kv_blocks_free, engine->Stats().kv_blocks_total);
  EXPECT_GT(engine->Stats().lookahead_hits, 0);
}

}  // namespace
}  // namespace llm::engine
