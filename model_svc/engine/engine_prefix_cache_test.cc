// Automatic prefix caching through the engine, on a small random-weight
// model with blocks of 4 positions: a cached prefix gives the same logits,
// bit for bit, as computing it (the CPU kernels are batch invariant, so
// computing a suffix alone or with its prefix writes the same KV and the
// same logits); cached blocks outlive their session until the pool needs
// them; requests that want every row compute everything.
#include <cstring>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "model_svc/engine/engine.h"
#include "model_svc/engine/engine_testing.h"

namespace llm::engine {
namespace {

using testing::EngineSetup;
using testing::MakeEngine;
using testing::Request;
using testing::Tokens;

void ExpectSameBits(const model::Logits& a, const model::Logits& b) {
  ASSERT_EQ(a.values.size(), b.values.size());
  EXPECT_EQ(std::memcmp(a.values.data(), b.values.data(), a.values.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(&a.log_sum_exp, &b.log_sum_exp, sizeof(float)), 0);
}

std::vector<int32_t> Concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// A prompt that shares 37 tokens with an earlier one (9 full blocks and one
// token), then decodes: the cached engine reuses 36 tokens and returns the
// uncached engine's logits bit for bit, for the prompt and every decode.
TEST(EnginePrefixCacheTest, CachedPrefixGivesTheSameLogitsBitForBit) {
  auto cached = MakeEngine();
  EngineSetup off_setup;
  off_setup.prefix_cache = false;
  auto uncached = MakeEngine(off_setup);
  const std::vector<int32_t> shared = Tokens(37, 1);
  const std::vector<int32_t> first = Concat(shared, Tokens(5, 2));
  const std::vector<int32_t> second = Concat(shared, Tokens(10, 3));

  auto a = cached->Append(Request("", first));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(cached->Stats().prefix_cache_hits, 0);
  EXPECT_EQ(a->cached_tokens, 0);
  EXPECT_EQ(cached->Stats().prefix_cache_queries, 42);

  auto hit = cached->Append(Request("", second));
  auto miss = uncached->Append(Request("", second));
  ASSERT_TRUE(hit.ok()) << hit.status();
  ASSERT_TRUE(miss.ok()) << miss.status();
  EXPECT_EQ(hit->num_tokens, 47);
  EXPECT_EQ(hit->cached_tokens, 36);
  EXPECT_EQ(cached->Stats().prefix_cache_hits, 36);
  EXPECT_EQ(cached->Stats().prefill_tokens, 42 + 11);  // computed, not reused
  EXPECT_EQ(uncached->Stats().prefix_cache_queries, 0);
  ExpectSameBits(hit->logits.back(), miss->logits.back());

  int32_t next = model::Argmax(hit->logits.back());
  for (int i = 0; i < 6; ++i) {
    AppendRequest d1 = Request(hit->session_id, {next});
    AppendRequest d2 = Request(miss->session_id, {next});
    d1.decode = d2.decode = true;
    auto s1 = cached->Append(std::move(d1));
    auto s2 = uncached->Append(std::move(d2));
    ASSERT_TRUE(s1.ok() && s2.ok());
    ExpectSameBits(s1->logits.back(), s2->logits.back());
    next = model::Argmax(s1->logits.back());
  }
  const std::vector<SessionInfo> sessions = cached->ListSessions();
  ASSERT_EQ(sessions.size(), 2u);
  for (const SessionInfo& s : sessions) {
    if (s.id == hit->session_id) {
      EXPECT_EQ(s.prefilled_tokens, 47);
    }
  }
}

// A released session's blocks stay cached (and count as free); a new
// session finds them; once the pool needs them they are evicted, and a
// later lookup computes everything again, with the same logits.
TEST(EnginePrefixCacheTest, ReleasedPrefixIsReusedUntilThePoolNeedsIt) {
  EngineSetup setup;
  setup.kv_blocks = 16;  // 64 positions
  auto engine = MakeEngine(setup);
  const std::vector<int32_t> prompt = Tokens(30, 4);
  auto a = engine->Append(Request("", prompt));
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(engine->Release(a->session_id).ok());
  EXPECT_EQ(engine->Stats().kv_blocks_cached, 7);  // positions 0-27
  EXPECT_EQ(engine->Stats().kv_blocks_free, 16);

  auto b = engine->Append(Request("", prompt));
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(engine->Stats().prefix_cache_hits, 28);
  ExpectSameBits(b->logits.back(), a->logits.back());
  ASSERT_TRUE(engine->Release(b->session_id).ok());

  // 60 other positions: every unnamed block, then the cached ones.
  auto c = engine->Append(Request("", Tokens(60, 5)));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(engine->Stats().evicted_sessions, 0);
  ASSERT_TRUE(engine->Release(c->session_id).ok());
  const int64_t hits = engine->Stats().prefix_cache_hits;
  auto d = engine->Append(Request("", prompt));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_LT(engine->Stats().prefix_cache_hits - hits, 28);
  ExpectSameBits(d->logits.back(), a->logits.back());
}

// Two sessions submitted together with the same prompt, at 16 tokens a step:
// the second waits behind the first's chunks and, looking the prefix up
// again before every step, picks up the blocks each step completes.
TEST(EnginePrefixCacheTest, ARequestQueuedBehindTheSamePromptSharesItsCompletedBlocks) {
  EngineSetup setup;
  setup.max_batch_tokens = 16;
  auto engine = MakeEngine(setup);
  setup.prefix_cache = false;
  auto uncached = MakeEngine(setup);
  const std::vector<int32_t> prompt = Tokens(41, 8);
  const std::vector<int32_t> longer = Concat(prompt, Tokens(3, 9));
  absl::Notification a_done, b_done;
  absl::StatusOr<AppendResult> a, b;
  engine->Submit(Request("", prompt), [&](absl::StatusOr<AppendResult> r) {
    a = std::move(r);
    a_done.Notify();
  });
  engine->Submit(Request("", longer), [&](absl::StatusOr<AppendResult> r) {
    b = std::move(r);
    b_done.Notify();
  });
  a_done.WaitForNotification();
  b_done.WaitForNotification();
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_GE(engine->Stats().prefix_cache_hits, 16);
  EXPECT_EQ(engine->Stats().prefix_cache_queries, 41 + 44);
  auto expected = uncached->Append(Request("", longer));
  ASSERT_TRUE(expected.ok()) << expected.status();
  ExpectSameBits(b->logits.back(), expected->logits.back());
}

// A session that ends on a block boundary extends its own chain from the
// cache (a conversation's next turn after a fork or a truncation), and a
// request for every row's logits computes everything.
TEST(EnginePrefixCacheTest, BoundarySessionsExtendAndAllLogitsComputeEverything) {
  auto engine = MakeEngine();
  const std::vector<int32_t> prompt = Tokens(21, 6);
  auto a = engine->Append(Request("", prompt));
  ASSERT_TRUE(a.ok()) << a.status();

  auto b = engine->Append(Request("", {prompt.begin(), prompt.begin() + 8}));
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(engine->Stats().prefix_cache_hits, 4);
  auto more = engine->Append(Request(b->session_id, {prompt.begin() + 8, prompt.end()}));
  ASSERT_TRUE(more.ok()) << more.status();
  EXPECT_EQ(engine->Stats().prefix_cache_hits, 4 + 12);
  ExpectSameBits(more->logits.back(), a->logits.back());

  const int64_t queries = engine->Stats().prefix_cache_queries;
  auto all = engine->Append(Request("", prompt, /*all_logits=*/true));
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(engine->Stats().prefix_cache_queries, queries);
  EXPECT_EQ(engine->Stats().prefix_cache_hits, 16);
  ASSERT_EQ(all->logits.size(), prompt.size());
  ExpectSameBits(all->logits.back(), a->logits.back());
}

}  // namespace
}  // namespace llm::engine
