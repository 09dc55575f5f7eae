// The session table on its own: ids, lookup, fork and truncate, release
// (deferred while busy), expiry and the LRU order, with a small block pool.
#include "model_svc/engine/session_table.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace llm::engine {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1000);

// Appends n tokens to s and counts their KV as computed.
void Append(Session& s, int n) {
  std::vector<kv::BlockCopy> copies;
  ASSERT_TRUE(s.kv.Reserve(n, &copies).ok());
  for (int i = 0; i < n; ++i) s.tokens.push_back(i);
  s.kv.Commit(n, s.tokens);
}

TEST(SessionTableTest, CreateGivesFreshPrefixedIdsAndFindsThem) {
  kv::BlockManager blocks(8, 4);
  SessionTable table(&blocks, "pod.", 3, 1);
  Session* a = table.Create(kT0);
  Session* b = table.Create(kT0);
  ASSERT_EQ(a->id.size(), 4u + 16u);
  EXPECT_EQ(a->id.substr(0, 4), "pod.");
  EXPECT_NE(a->id, b->id);
  EXPECT_NE(a->serial, b->serial);
  EXPECT_EQ(table.Find(a->id), a);
  EXPECT_EQ(table.Find("pod.nope"), nullptr);
  EXPECT_EQ(table.size(), 2);
  EXPECT_FALSE(table.full());
  table.Create(kT0);
  EXPECT_TRUE(table.full());
}

TEST(SessionTableTest, ForkSharesBlocksAndTruncateFreesThem) {
  kv::BlockManager blocks(8, 4);
  SessionTable table(&blocks, "", 4, 1);
  Session* parent = table.Create(kT0);
  Append(*parent, 6);
  Session* child = table.Fork(*parent, kT0 + absl::Seconds(1));
  EXPECT_EQ(child->tokens, parent->tokens);
  EXPECT_EQ(child->kv.blocks(), parent->kv.blocks());
  EXPECT_EQ(parent->last_used, kT0 + absl::Seconds(1));
  EXPECT_EQ(blocks.num_free(), 6);
  table.Truncate(*child, 3, kT0 + absl::Seconds(2));
  EXPECT_EQ(child->tokens.size(), 3u);
  EXPECT_EQ(child->kv.num_tokens(), 3);
  EXPECT_EQ(child->last_used, kT0 + absl::Seconds(2));
  EXPECT_EQ(blocks.ref_count(parent->kv.blocks()[1]), 1);
  table.Erase(parent);
  table.Erase(child);
  EXPECT_EQ(blocks.num_free(), 8);
  EXPECT_EQ(table.size(), 0);
}

TEST(SessionTableTest, ReleaseFreesAnIdleSessionAtOnceAndABusyOneOnReclaim) {
  kv::BlockManager blocks(8, 4);
  SessionTable table(&blocks, "", 4, 1);
  Session* idle = table.Create(kT0);
  Append(*idle, 4);
  Session* busy = table.Create(kT0);
  Append(*busy, 4);
  busy->busy = true;
  const std::string idle_id = idle->id, busy_id = busy->id;
  table.Release(idle);
  EXPECT_EQ(table.Find(idle_id), nullptr);
  EXPECT_EQ(blocks.num_free(), 7);
  table.Release(busy);
  EXPECT_EQ(table.Find(busy_id), nullptr);
  EXPECT_TRUE(busy->released);
  EXPECT_EQ(busy->kv.num_tokens(), 4);  // still usable by its request
  EXPECT_EQ(blocks.num_free(), 7);
  table.Reclaim(busy);
  EXPECT_EQ(blocks.num_free(), 8);
  EXPECT_EQ(table.size(), 0);
}

TEST(SessionTableTest, LeastRecentlyUsedIdleSkipsBusyAndEmptySessions) {
  kv::BlockManager blocks(8, 4);
  SessionTable table(&blocks, "", 8, 1);
  Session* empty = table.Create(kT0);  // oldest, but holds no blocks
  Session* old_busy = table.Create(kT0 + absl::Seconds(1));
  Append(*old_busy, 1);
  old_busy->busy = true;
  Session* older = table.Create(kT0 + absl::Seconds(2));
  Append(*older, 1);
  Session* newer = table.Create(kT0 + absl::Seconds(3));
  Append(*newer, 1);
  EXPECT_EQ(table.LeastRecentlyUsedIdle(), older);
  table.Erase(older);
  EXPECT_EQ(table.LeastRecentlyUsedIdle(), newer);
  table.Erase(newer);
  EXPECT_EQ(table.LeastRecentlyUsedIdle(), nullptr);
  EXPECT_NE(table.Find(empty->id), nullptr);
}

// A session whose blocks are all shared (here with its busy fork) frees
// nothing when evicted: an idle session with a block of its own goes first,
// even if it was used more recently.
TEST(SessionTableTest, LeastRecentlyUsedIdlePrefersSessionsThatFreeBlocks) {
  kv::BlockManager blocks(8, 4);
  SessionTable table(&blocks, "", 8, 1);
  Session* shared = table.Create(kT0);
  Append(*shared, 8);
  Session* fork = table.Fork(*shared, kT0 + absl::Seconds(1));
  fork->busy = true;
  shared->last_used = kT0;
  Session* own = table.Create(kT0 + absl::Seconds(2));
  Append(*own, 4);
  EXPECT_EQ(table.LeastRecentlyUsedIdle(), own);
  table.Erase(own);
  EXPECT_EQ(table.LeastRecentlyUsedIdle(), shared);  // the only one left
}

// The slot eviction's order: least recently used first, blocks or not,
// skipping sessions with a caller's request in flight and the one to keep;
// a session busy with a lookahead guess alone is a candidate.
TEST(SessionTableTest, LeastRecentlyUsedCallerIdleSkipsCallersRequestsAndTheKeptOne) {
  kv::BlockManager blocks(8, 4);
  SessionTable table(&blocks, "", 8, 1);
  Session* requesting = table.Create(kT0);
  requesting->busy = true;
  requesting->request.emplace();
  Session* kept = table.Create(kT0 + absl::Seconds(1));
  Session* guessing = table.Create(kT0 + absl::Seconds(2));
  guessing->busy = true;
  guessing->guess = Guess{.token = 1};
  Session* empty = table.Create(kT0 + absl::Seconds(3));
  Session* holding = table.Create(kT0 + absl::Seconds(4));
  Append(*holding, 4);
  EXPECT_EQ(table.LeastRecentlyUsedCallerIdle(kept), guessing);
  EXPECT_EQ(table.LeastRecentlyUsedCallerIdle(nullptr), kept);
  table.Erase(guessing);
  EXPECT_EQ(table.LeastRecentlyUsedCallerIdle(kept), empty);
  table.Erase(empty);
  EXPECT_EQ(table.LeastRecentlyUsedCallerIdle(kept), holding);
  table.Erase(holding);
  EXPECT_EQ(table.LeastRecentlyUsedCallerIdle(kept), nullptr);
}

TEST(SessionTableTest, ExpireIdleFreesOnlyIdleSessionsPastTheTtl) {
  kv::BlockManager blocks(8, 4);
  SessionTable table(&blocks, "", 8, 1);
  Session* stale = table.Create(kT0);
  Append(*stale, 4);
  Session* stale_busy = table.Create(kT0);
  stale_busy->busy = true;
  Session* fresh = table.Create(kT0 + absl::Seconds(50));
  const std::string busy_id = stale_busy->id, fresh_id = fresh->id;
  EXPECT_EQ(table.ExpireIdle(kT0 + absl::Seconds(60), absl::Seconds(30)), 1);
  EXPECT_EQ(table.size(), 2);
  EXPECT_NE(table.Find(busy_id), nullptr);
  EXPECT_NE(table.Find(fresh_id), nullptr);
  EXPECT_EQ(blocks.num_free(), 8);
}

}  // namespace
}  // namespace llm::engine
