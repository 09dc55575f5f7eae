#include "client/transport/prefix_index.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace llm::client {
namespace {

std::vector<int32_t> Prompt(int n, int32_t seed) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) p[static_cast<size_t>(i)] = seed * 1000 + i;
  return p;
}

TEST(PrefixIndexTest, LongestRecordedPrefixWinsInWholeBlocks) {
  PrefixIndex index;
  const std::vector<int32_t> system = Prompt(200, 1);  // 3 whole blocks
  index.Record(std::span(system).first(70), "a");      // 1 block
  index.Record(system, "b");                           // 3 blocks
  std::vector<int32_t> ask = system;
  ask.resize(150);  // 2 whole blocks shared with b's, 1 with a's
  ask.push_back(7);
  PrefixIndex::Match m = index.Longest(ask);
  EXPECT_EQ(m.replica_id, "b");  // recorded last for block 1 too, and longer
  EXPECT_EQ(m.tokens, 128);
  // Another prompt from the second token on: nothing shared.
  std::vector<int32_t> other = system;
  other[0] = -5;
  EXPECT_EQ(index.Longest(other).replica_id, "");
  // Shorter than a block: nothing to match.
  EXPECT_EQ(index.Longest(std::span(system).first(63)).tokens, 0);
}

TEST(PrefixIndexTest, LeastRecentlyUsedEntriesGoPastTheCapacity) {
  PrefixIndex index(/*capacity=*/4, /*max_blocks=*/2);
  const std::vector<int32_t> p1 = Prompt(128, 1), p2 = Prompt(128, 2), p3 = Prompt(128, 3);
  index.Record(p1, "a");
  index.Record(p2, "b");
  EXPECT_EQ(index.size(), 4u);
  EXPECT_EQ(index.Longest(p1).replica_id, "a");  // touches p1's 2-block entry
  index.Record(p3, "c");  // drops the two least recent: p1's 1-block, p2's 1-block entries
  EXPECT_EQ(index.size(), 4u);
  EXPECT_EQ(index.Longest(p3).replica_id, "c");
  EXPECT_EQ(index.Longest(p1).tokens, 128);
  EXPECT_EQ(index.Longest(std::span(p1).first(64)).tokens, 0);
  EXPECT_EQ(index.Longest(std::span(p2).first(64)).tokens, 0);
}

}  // namespace
}  // namespace llm::client
