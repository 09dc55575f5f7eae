// The engine over a small random-weight model: batching, chunked prefill,
// sessions (fork, truncate, release, eviction, expiry) and the error table.
//
// Tolerance: the model has Q4_1 weights, whose activations are rounded to
// int8 per block; the CPU kernels are batch invariant (quant.h), so every
// variant (batched, chunked, forked) still agrees to 1e-5 of the largest
// logit magnitude (in fact bit for bit), and the argmax must be identical.
#include "model_svc/engine/engine.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/cpu_set.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model_svc/engine/engine_testing.h"
#include "model_svc/engine/limits.h"

namespace llm::engine {
namespace {

using model::Logits;
using testing::EngineSetup;
using testing::ExpectClose;
using ::testing::HasSubstr;
using testing::MakeEngine;
using testing::MakeGatedEngine;
using testing::Request;
using testing::StepGate;
using testing::Tokens;

TEST(EngineTest, PrefillThenDecodesEqualsOnePrefill) {
  auto engine = MakeEngine();
  const std::vector<int32_t> tokens = Tokens(23, 1);
  auto whole = engine->Append(Request("", tokens, /*all_logits=*/true));
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(whole->num_tokens, 23);
  ASSERT_EQ(whole->logits.size(), 23u);
  for (int k : {1, 5, 16}) {
    auto r = engine->Append(Request("", {tokens.begin(), tokens.begin() + k}));
    ASSERT_TRUE(r.ok()) << r.status();
    ExpectClose(r->logits.back(), whole->logits[k - 1]);
    for (int i = k; i < 23; ++i) {
      AppendRequest d = Request(r->session_id, {tokens[i]});
      d.decode = true;
      auto step = engine->Append(std::move(d));
      ASSERT_TRUE(step.ok()) << step.status();
      EXPECT_EQ(step->num_tokens, i + 1);
      ExpectClose(step->logits.back(), whole->logits[i]);
    }
  }
}

TEST(EngineTest, ChunkedPrefillEqualsOneStep) {
  auto big = MakeEngine();
  EngineSetup small_setup;
  small_setup.max_batch_tokens = 5;
  auto small = MakeEngine(small_setup);
  const std::vector<int32_t> tokens = Tokens(37, 2);
  auto a = big->Append(Request("", tokens, true));
  auto b = small->Append(Request("", tokens, true));
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(b->logits.size(), 37u);
  for (int i = 0; i < 37; ++i) ExpectClose(b->logits[i], a->logits[i]);
  EXPECT_GE(small->Stats().steps, 8);
}

// A scored prompt (prompt_logprobs): every row but the last gives the next
// token's logit and the top ids of its position, bit for bit those of the
// full logits; the last row is the request's own encoding; chunking the
// prompt (5 tokens a step) changes no bit.
TEST(EngineTest, ScoredPromptGivesEachNextTokensLogitAndTopIds) {
  auto engine = MakeEngine();
  EngineSetup small_setup;
  small_setup.max_batch_tokens = 5;
  auto chunked = MakeEngine(small_setup);
  const std::vector<int32_t> tokens = Tokens(19, 3);
  auto full = engine->Append(Request("", tokens, /*all_logits=*/true));
  ASSERT_TRUE(full.ok()) << full.status();
  for (Engine* e : {engine.get(), chunked.get()}) {
    AppendRequest r = Request("", tokens);
    r.prompt_logprobs = 3;
    r.logits = {model::LogitsEncoding::kTopN, 2};
    auto scored = e->Append(std::move(r));
    ASSERT_TRUE(scored.ok()) << scored.status();
    ASSERT_EQ(scored->logits.size(), tokens.size());
    for (size_t i = 0; i + 1 < tokens.size(); ++i) {
      const Logits& row = scored->logits[i];
      const std::vector<float>& values = full->logits[i].values;
      EXPECT_EQ(row.target_logit, values[tokens[i + 1]]) << i;
      EXPECT_EQ(row.log_sum_exp, full->logits[i].log_sum_exp) << i;
      ASSERT_EQ(row.top_ids.size(), 3u);
      for (size_t j = 0; j < 3; ++j) EXPECT_EQ(row.top_logits[j], values[row.top_ids[j]]);
      EXPECT_EQ(row.top_ids[0], model::Argmax(full->logits[i]));
    }
    const Logits& last = scored->logits.back();
    EXPECT_EQ(last.encoding, model::LogitsEncoding::kTopN);
    EXPECT_EQ(last.top_ids.size(), 2u);
  }
  AppendRequest too_many = Request("", tokens);
  too_many.prompt_logprobs = 1 << 20;
  EXPECT_EQ(engine->Append(std::move(too_many)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(EngineTest, ConcurrentSessionsMatchEachAlone) {
  auto engine = MakeEngine();
  constexpr int kSessions = 8, kSteps = 12;
  std::vector<std::vector<int32_t>> prompts, continuations;
  for (int s = 0; s < kSessions; ++s) {
    prompts.push_back(Tokens(3 + 4 * s, 10 + s));
    continuations.push_back(Tokens(kSteps, 100 + s));
  }
  // Each alone.
  std::vector<std::vector<Logits>> alone(kSessions);
  for (int s = 0; s < kSessions; ++s) {
    auto r = engine->Append(Request("", prompts[s]));
    ASSERT_TRUE(r.ok());
    for (int i = 0; i < kSteps; ++i) {
      auto d = engine->Append(Request(r->session_id, {continuations[s][i]}));
      ASSERT_TRUE(d.ok());
      alone[s].push_back(d->logits.back());
    }
  }
  // All at once, from eight threads.
  const int64_t steps_before = engine->Stats().steps;
  std::vector<std::vector<Logits>> together(kSessions);
  std::vector<std::thread> threads;
  for (int s = 0; s < kSessions; ++s) {
    threads.emplace_back([&, s] {
      auto r = engine->Append(Request("", prompts[s]));
      ASSERT_TRUE(r.ok());
      for (int i = 0; i < kSteps; ++i) {
        auto d = engine->Append(Request(r->session_id, {continuations[s][i]}));
        ASSERT_TRUE(d.ok());
        together[s].push_back(d->logits.back());
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int s = 0; s < kSessions; ++s) {
    ASSERT_EQ(together[s].size(), static_cast<size_t>(kSteps));
    for (int i = 0; i < kSteps; ++i) ExpectClose(together[s][i], alone[s][i]);
  }
  // Batching happened: fewer steps than requests.
  EXPECT_LT(engine->Stats().steps - steps_before, kSessions * (kSteps + 1));
}

TEST(EngineTest, ForkIsCopyOnWrite) {
  auto engine = MakeEngine();
  const std::vector<int32_t> prefix = Tokens(10, 3);  // ends inside a block of 4
  auto parent = engine->Append(Request("", prefix));
  ASSERT_TRUE(parent.ok());
  auto child = engine->Fork(parent->session_id);
  ASSERT_TRUE(child.ok()) << child.status();
  auto a = engine->Append(Request(parent->session_id, {5, 6}));
  auto b = engine->Append(Request(*child, {7, 8}));
  ASSERT_TRUE(a.ok() && b.ok());
  std::vector<int32_t> pa = prefix, pb = prefix;
  pa.insert(pa.end(), {5, 6});
  pb.insert(pb.end(), {7, 8});
  auto fa = engine->Append(Request("", pa));
  auto fb = engine->Append(Request("", pb));
  ExpectClose(a->logits.back(), fa->logits.back());
  ExpectClose(b->logits.back(), fb->logits.back());
}

TEST(EngineTest, TruncateRollsBack) {
  auto engine = MakeEngine();
  const std::vector<int32_t> tokens = Tokens(20, 4);
  auto whole = engine->Append(Request("", tokens, true));
  ASSERT_TRUE(whole.ok());
  auto s = engine->Append(Request("", tokens));
  ASSERT_TRUE(engine->Truncate(s->session_id, 9).ok());
  auto again = engine->Append(Request(s->session_id, {tokens[9], tokens[10]}));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->num_tokens, 11);
  ExpectClose(again->logits.back(), whole->logits[10]);
  EXPECT_EQ(engine->Truncate(s->session_id, 12).code(), absl::StatusCode::kInvalidArgument);
}

TEST(EngineTest, ErrorTable) {
  EngineSetup setup;
  setup.max_sessions = 1;
  auto engine = MakeEngine(setup);
  auto code = [&](AppendRequest r) { return engine->Append(std::move(r)).status().code(); };
  EXPECT_EQ(code(Request("nope", {1})), absl::StatusCode::kNotFound);
  EXPECT_EQ(code(Request("", {})), absl::StatusCode::kInvalidArgument);
  auto bad = engine->Append(Request("", {1, 300}));
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("token id 300 at index 1"));
  AppendRequest top = Request("", {1});
  top.logits = {model::LogitsEncoding::kTopN, 0};
  EXPECT_EQ(code(std::move(top)), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(Request("", Tokens(257, 5))), absl::StatusCode::kOutOfRange);
  auto a = engine->Append(Request("", {1, 2}));
  ASSERT_TRUE(a.ok());
  // At the limit, a Fork keeps its parent: no other session to evict.
  const auto forked = engine->Fork(a->session_id).status();
  EXPECT_EQ(forked.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(LimitOf(forked), Limit::kMaxSessions);
  EXPECT_EQ(code(Request(a->session_id, Tokens(255, 6))), absl::StatusCode::kOutOfRange);
  // A new session refused for its length evicts no one.
  EXPECT_EQ(code(Request("", Tokens(257, 5))), absl::StatusCode::kOutOfRange);
  // Nothing was lost: the session still holds its tokens.
  auto list = engine->ListSessions();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].num_tokens, 2);
  EXPECT_EQ(engine->Stats().evicted_for_session_limit, 0);
  EXPECT_EQ(engine->Release("nope").code(), absl::StatusCode::kNotFound);
}

// Idle sessions give way to new ones at the session limit, least recently
// used first; the evicted one is gone (NOT_FOUND, for its owner to rebuild).
TEST(EngineTest, SessionLimitEvictsTheLeastRecentlyUsedIdleSession) {
  EngineSetup setup;
  setup.max_sessions = 2;
  auto engine = MakeEngine(setup);
  auto a = engine->Append(Request("", {1, 2}));
  auto b = engine->Append(Request("", {3, 4}));
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(engine->Append(Request(a->session_id, {5})).ok());  // b is now the LRU
  auto c = engine->Append(Request("", {6, 7}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(engine->Append(Request(b->session_id, {1})).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(engine->Stats().evicted_for_session_limit, 1);
  EXPECT_EQ(engine->Stats().evicted_sessions, 0);  // the KV pool's count
  // A Fork makes room too, keeping its parent (here the LRU).
  auto fork = engine->Fork(a->session_id);
  ASSERT_TRUE(fork.ok()) << fork.status();
  EXPECT_EQ(engine->Append(Request(c->session_id, {1})).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_TRUE(engine->Append(Request(a->session_id, {1})).ok());
  EXPECT_EQ(engine->Stats().evicted_for_session_limit, 2);
  EXPECT_EQ(engine->Stats().sessions, 2);
}

// The CPU's per-token prefill cost is flat from ~32 tokens a step
// (Backend::PrefillStepTokens), so by default two prompts queued together
// take a step each: the first one's first token does not wait for the
// second. With prefill_step_tokens 0 one step takes both.
TEST(EngineTest, ByDefaultPromptsQueuedTogetherTakeAStepEachOnTheCpu) {
  for (const int64_t target : {-1, 0}) {
    SCOPED_TRACE(target);
    StepGate gate;
    EngineSetup setup;
    setup.max_batch_tokens = 128;
    setup.prefill_step_tokens = target;
    auto engine = MakeGatedEngine(gate, setup);
    EXPECT_EQ(engine->prefill_step_tokens(), target < 0 ? 32 : 0);
    gate.Close();
    absl::Notification done[3];
    auto submit = [&](std::vector<int32_t> tokens, absl::Notification* n) {
      engine->Submit(Request("", std::move(tokens)), [n](absl::StatusOr<AppendResult> r) {
        EXPECT_TRUE(r.ok()) << r.status();
        n->Notify();
      });
    };
    submit({1}, &done[0]);
    gate.AwaitArrival();  // its step is planned and held
    const int64_t steps = engine->Stats().steps;
    submit(Tokens(40, 1), &done[1]);
    submit(Tokens(40, 2), &done[2]);
    gate.Open();
    for (absl::Notification& n : done) n.WaitForNotification();
    EXPECT_EQ(engine->Stats().steps - steps, target < 0 ? 3 : 2);
  }
}

// RESOURCE_EXHAUSTED for a new session only when every session has a
// request in flight.
TEST(EngineTest, SessionLimitIsExhaustedOnlyWhileEverySessionIsBusy) {
  StepGate gate;
  EngineSetup setup;
  setup.max_sessions = 2;
  auto engine = MakeGatedEngine(gate, setup);
  auto a = engine->Append(Request("", {1, 2}));
  auto b = engine->Append(Request("", {3, 4}));
  ASSERT_TRUE(a.ok() && b.ok());
  gate.Close();
  absl::Notification a_done, b_done;
  engine->Submit(Request(a->session_id, {5}), [&](absl::StatusOr<AppendResult> r) {
    EXPECT_TRUE(r.ok()) << r.status();
    a_done.Notify();
  });
  engine->Submit(Request(b->session_id, {6}), [&](absl::StatusOr<AppendResult> r) {
    EXPECT_TRUE(r.ok()) << r.status();
    b_done.Notify();
  });
  const absl::Status refused = engine->Append(Request("", {7})).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(LimitOf(refused), Limit::kMaxSessions);
  EXPECT_THAT(std::string(refused.message()), HasSubstr("session limit"));
  gate.Open();
  a_done.WaitForNotification();
  b_done.WaitForNotification();
  auto c = engine->Append(Request("", {7}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(engine->Stats().evicted_for_session_limit, 1);
  EXPECT_EQ(engine->Stats().sessions, 2);
}

TEST(EngineTest, BusySessionIsAborted) {
  StepGate gate;
  auto engine = MakeGatedEngine(gate);
  auto s = engine->Append(Request("", {1}));
  ASSERT_TRUE(s.ok());
  gate.Close();
  absl::Notification done;
  absl::StatusOr<AppendResult> first;
  engine->Submit(Request(s->session_id, Tokens(20, 7)), [&](absl::StatusOr<AppendResult> r) {
    first = std::move(r);
    done.Notify();
  });
  auto second = engine->Append(Request(s->session_id, {2}));
  EXPECT_EQ(second.status().code(), absl::StatusCode::kAborted);
  EXPECT_THAT(std::string(second.status().message()), HasSubstr("busy"));
  EXPECT_EQ(engine->Truncate(s->session_id, 0).code(), absl::StatusCode::kAborted);
  EXPECT_EQ(engine->Fork(s->session_id).status().code(), absl::StatusCode::kAborted);
  gate.Open();
  done.WaitForNotification();
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->num_tokens, 21);
}

TEST(EngineTest, CancelledRequestKeepsComputedTokens) {
  StepGate gate;
  EngineSetup setup;
  setup.max_batch_tokens = 2;
  auto engine = MakeGatedEngine(gate, setup);
  auto s = engine->Append(Request("", {1, 2, 3}));
  ASSERT_TRUE(s.ok());
  gate.Close();
  AppendRequest r = Request(s->session_id, Tokens(20, 8));
  r.cancel = std::make_shared<std::atomic<bool>>(false);
  CancelFlag cancel = r.cancel;
  absl::Notification done;
  absl::Status status;
  engine->Submit(std::move(r), [&](absl::StatusOr<AppendResult> res) {
    status = res.status();
    done.Notify();
  });
  gate.AwaitArrival();  // the first chunk of 2 is scheduled
  cancel->store(true);
  gate.Open();
  done.WaitForNotification();
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled);
  auto list = engine->ListSessions();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].num_tokens, 5);  // the chunk computed before the cancel
  EXPECT_FALSE(list[0].busy);
  auto more = engine->Append(Request(s->session_id, {4}));
  ASSERT_TRUE(more.ok()) << more.status();
  EXPECT_EQ(more->num_tokens, 6);
  // A new session whose first request is cancelled disappears.
  AppendRequest fresh = Request("", {1, 2});
  fresh.cancel = std::make_shared<std::atomic<bool>>(true);
  EXPECT_EQ(engine->Append(std::move(fresh)).status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(engine->ListSessions().size(), 1u);
}

TEST(EngineTest, ReleaseWhileBusyStopsTheRequestAndFreesTheSession) {
  StepGate gate;
  EngineSetup setup;
  setup.max_batch_tokens = 2;
  auto engine = MakeGatedEngine(gate, setup);
  auto s = engine->Append(Request("", {1, 2, 3}));
  ASSERT_TRUE(s.ok());
  gate.Close();
  absl::Notification done;
  absl::Status status;
  engine->Submit(Request(s->session_id, Tokens(20, 13)), [&](absl::StatusOr<AppendResult> r) {
    status = r.status();
    done.Notify();
  });
  gate.AwaitArrival();
  EXPECT_TRUE(engine->Release(s->session_id).ok());
  EXPECT_EQ(engine->Append(Request(s->session_id, {1})).status().code(),
            absl::StatusCode::kNotFound);
  gate.Open();
  done.WaitForNotification();
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(engine->Stats().sessions, 0);
  EXPECT_EQ(engine->Stats().kv_blocks_free, engine->Stats().kv_blocks_total);
}

TEST(EngineTest, LeastRecentlyUsedSessionIsEvictedWhenThePoolIsFull) {
  EngineSetup setup;
  setup.kv_blocks = 10;  // 40 positions
  auto engine = MakeEngine(setup);
  auto a = engine->Append(Request("", Tokens(16, 9)));
  auto b = engine->Append(Request("", Tokens(16, 10)));
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(engine->Append(Request(a->session_id, {1})).ok());  // b is now the LRU
  auto c = engine->Append(Request("", Tokens(16, 11)));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(engine->Append(Request(b->session_id, {1})).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_TRUE(engine->Append(Request(a->session_id, {1})).ok());
  EXPECT_EQ(engine->Stats().evicted_sessions, 1);
  // More than the whole pool can never fit.
  EXPECT_EQ(engine->Append(Request("", Tokens(41, 12))).status().code(),
            absl::StatusCode::kResourceExhausted);
}

TEST(EngineTest, ReleaseFreesEveryBlock) {
  auto engine = MakeEngine();
  const int32_t total = engine->Stats().kv_blocks_total;
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) {
    auto r = engine->Append(Request("", Tokens(9 + i, 20 + i)));
    ASSERT_TRUE(r.ok());
    ids.push_back(r->session_id);
    auto f = engine->Fork(r->session_id);
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE(engine->Append(Request(*f, {1, 2, 3})).ok());
    ids.push_back(*f);
  }
  EXPECT_LT(engine->Stats().kv_blocks_free, total);
  for (const std::string& id : ids) EXPECT_TRUE(engine->Release(id).ok());
  EXPECT_EQ(engine->Stats().kv_blocks_free, total);
  EXPECT_EQ(engine->Stats().sessions, 0);
}

TEST(EngineTest, IdleSessionsExpire) {
  EngineSetup setup;
  setup.ttl = absl::Milliseconds(50);
  auto engine = MakeEngine(setup);
  auto r = engine->Append(Request("", {1, 2}));
  ASSERT_TRUE(r.ok());
  // The sweep runs about once a second.
  for (int i = 0; i < 50 && engine->Stats().sessions > 0; ++i)
    absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(engine->Stats().sessions, 0);
  EXPECT_EQ(engine->Stats().expired_sessions, 1);
  EXPECT_EQ(engine->Stats().kv_blocks_free, engine->Stats().kv_blocks_total);
}

TEST(EngineTest, ListSessionsCountsPrefillAndDecode) {
  auto engine = MakeEngine();
  auto r = engine->Append(Request("", {1, 2, 3, 4, 5}));
  ASSERT_TRUE(r.ok());
  AppendRequest d = Request(r->session_id, {6});
  d.decode = true;
  ASSERT_TRUE(engine->Append(std::move(d)).ok());
  ASSERT_TRUE(engine->Append(Request(r->session_id, {7, 8})).ok());
  auto list = engine->ListSessions();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].num_tokens, 8);
  EXPECT_EQ(list[0].prefilled_tokens, 7);
  EXPECT_EQ(list[0].decoded_tokens, 1);
  EXPECT_EQ(list[0].kv_blocks, 2);
}

// EngineOptions::step_cpus and callback_cpus: the step loop computes on the
// first (seen from the step hook, before each forward) and runs the
// completion callbacks on the second.
absl::StatusOr<std::unique_ptr<model::LlamaModel>> SmallModel() {
  model::ModelOptions mo;
  mo.max_step_tokens = 16;
  mo.max_logit_rows = 16;
  mo.kv_blocks = 16;
  mo.kv_block_size = 4;
  return model::testing::LoadRandomModel(testing::Spec(), mo, 2);
}

TEST(EngineTest, TheStepLoopComputesOnItsCpusAndCallsBackOnTheOthers) {
  const absl::StatusOr<std::vector<int>> allowed = ThisThreadCpus();
  ASSERT_TRUE(allowed.ok()) << allowed.status();
  auto model = SmallModel();
  ASSERT_TRUE(model.ok()) << model.status();
  EngineOptions options;
  options.step_cpus = {allowed->back()};
  options.callback_cpus = {allowed->front()};
  absl::Mutex mu;
  std::vector<std::vector<int>> in_steps;
  auto engine = EngineTestPeer::CreateWithStepHook(*std::move(model), options, [&] {
    absl::MutexLock lock(&mu);
    in_steps.push_back(ThisThreadCpus().value_or(std::vector<int>{}));
  });
  ASSERT_TRUE(engine.ok()) << engine.status();
  for (int i = 0; i < 2; ++i) {
    absl::Notification done;
    absl::StatusOr<std::vector<int>> in_callback;
    (*engine)->Submit(Request("", {1, 2, 3}), [&](absl::StatusOr<AppendResult> r) {
      EXPECT_TRUE(r.ok()) << r.status();
      in_callback = ThisThreadCpus();
      done.Notify();
    });
    done.WaitForNotification();
    ASSERT_TRUE(in_callback.ok()) << in_callback.status();
    EXPECT_EQ(*in_callback, options.callback_cpus);
  }
  absl::MutexLock lock(&mu);
  ASSERT_EQ(in_steps.size(), 2u);
  for (const std::vector<int>& cpus : in_steps) EXPECT_EQ(cpus, options.step_cpus);
  EXPECT_EQ(*ThisThreadCpus(), *allowed);
}

TEST(EngineTest, CallbackCpusNeedStepCpus) {
  auto model = SmallModel();
  ASSERT_TRUE(model.ok()) << model.status();
  EngineOptions options;
  options.callback_cpus = {0};
  EXPECT_EQ(Engine::Create(*std::move(model), options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(EngineTest, StopAdmissionRejectsNewWork) {
  auto engine = MakeEngine();
  engine->StopAdmission();
  EXPECT_EQ(engine->Append(Request("", {1})).status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace llm::engine
