#include "gateway/keep_alive.h"

#include "gtest/gtest.h"

namespace llm::gateway {
namespace {

constexpr int64_t kMaxBody = 1 << 20;

TEST(KeepAliveTest, OffWithAZeroTimeout) {
  const KeepAlive k(absl::ZeroDuration(), 64);
  EXPECT_FALSE(k.enabled());
  EXPECT_EQ(k.max_idle(), 0);
  EXPECT_EQ(k.Threads(64), 64 + KeepAlive::kQuickWorkers);
  EXPECT_FALSE(k.MayKeepOpen(-1, false, kMaxBody));
}

TEST(KeepAliveTest, WorkersForTheIdleConnectionsOnTop) {
  const KeepAlive k(absl::Seconds(5), 64);
  EXPECT_TRUE(k.enabled());
  EXPECT_EQ(k.Threads(64), 64 + KeepAlive::kQuickWorkers + 64);
}

TEST(KeepAliveTest, KeepsOnlyWhileFewConnectionsAreOpen) {
  KeepAlive k(absl::Seconds(5), 2);
  k.Opened();
  EXPECT_TRUE(k.MayKeepOpen(-1, false, kMaxBody));  // no body
  k.Opened();
  EXPECT_TRUE(k.MayKeepOpen(100, false, kMaxBody));
  k.Opened();
  EXPECT_EQ(k.open(), 3);
  EXPECT_FALSE(k.MayKeepOpen(-1, false, kMaxBody)) << "3 open > 2 idle allowed";
  k.Closed();
  EXPECT_TRUE(k.MayKeepOpen(-1, false, kMaxBody));
}

TEST(KeepAliveTest, UnboundedOrLargeBodiesClose) {
  KeepAlive k(absl::Seconds(5), 8);
  k.Opened();
  EXPECT_TRUE(k.MayKeepOpen(kMaxBody, false, kMaxBody));
  EXPECT_FALSE(k.MayKeepOpen(kMaxBody + 1, false, kMaxBody));
  EXPECT_FALSE(k.MayKeepOpen(-1, true, kMaxBody));
}

}  // namespace
}  // namespace llm::gateway
