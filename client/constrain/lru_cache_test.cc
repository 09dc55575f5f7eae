#include "client/constrain/lru_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"

namespace llm::constrain {
namespace {

size_t Size(const std::string& v) { return v.size(); }

TEST(LruCacheTest, ComputesOnceAndCountsHits) {
  LruCache<std::string> cache(4, 1 << 20, Size);
  int calls = 0;
  auto f = [&] {
    ++calls;
    return std::string("value");
  };
  EXPECT_EQ(cache.GetOrCompute("k", f), "value");
  EXPECT_EQ(cache.GetOrCompute("k", f), "value");
  EXPECT_EQ(calls, 1);
  const auto s = cache.stats();
  EXPECT_EQ(s.hits, 1);
  EXPECT_EQ(s.misses, 1);
  EXPECT_EQ(s.entries, 1u);
  EXPECT_EQ(s.bytes, 1u + 5u);  // key + value
}

TEST(LruCacheTest, EntryBoundDropsTheLeastRecentlyUsed) {
  LruCache<std::string> cache(2, 1 << 20, Size);
  int calls = 0;
  auto f = [&] {
    ++calls;
    return std::string("v");
  };
  cache.GetOrCompute("a", f);
  cache.GetOrCompute("b", f);
  cache.GetOrCompute("a", f);  // a is now the most recent
  cache.GetOrCompute("c", f);  // b goes
  EXPECT_EQ(cache.stats().evictions, 1);
  cache.GetOrCompute("a", f);
  EXPECT_EQ(calls, 3);
  cache.GetOrCompute("b", f);
  EXPECT_EQ(calls, 4);
}

TEST(LruCacheTest, ByteBoundDropsEntriesAndSkipsOversizedValues) {
  LruCache<std::string> cache(100, 20, Size);
  cache.GetOrCompute("a", [] { return std::string(8, 'x'); });  // 9 bytes
  cache.GetOrCompute("b", [] { return std::string(8, 'x'); });  // 18
  cache.GetOrCompute("c", [] { return std::string(8, 'x'); });  // 27 > 20: a goes
  EXPECT_EQ(cache.stats().entries, 2u);
  EXPECT_EQ(cache.stats().bytes, 18u);
  // Too large to keep at all: returned, not cached, nothing else evicted.
  EXPECT_EQ(cache.GetOrCompute("big", [] { return std::string(30, 'y'); }).size(), 30u);
  EXPECT_EQ(cache.stats().entries, 2u);
  EXPECT_EQ(cache.stats().bytes, 18u);
}

TEST(LruCacheTest, ConcurrentCallersOfOneKeyWaitForOneComputation) {
  LruCache<std::string> cache(4, 1 << 20, Size);
  std::atomic<int> calls = 0;
  absl::Notification started;
  absl::Notification release;
  std::thread first([&] {
    cache.GetOrCompute("k", [&] {
      ++calls;
      started.Notify();
      release.WaitForNotification();
      return std::string("slow");
    });
  });
  started.WaitForNotification();
  std::vector<std::thread> others;
  std::vector<std::string> got(4);
  for (int i = 0; i < 4; ++i) {
    others.emplace_back([&, i] {
      got[i] = cache.GetOrCompute("k", [&] {
        ++calls;
        return std::string("again");
      });
    });
  }
  // Another key is not blocked by the computation in flight.
  EXPECT_EQ(cache.GetOrCompute("other", [] { return std::string("fast"); }), "fast");
  release.Notify();
  first.join();
  for (auto& t : others) t.join();
  EXPECT_EQ(calls.load(), 1);
  for (const std::string& g : got) EXPECT_EQ(g, "slow");
}

}  // namespace
}  // namespace llm::constrain
