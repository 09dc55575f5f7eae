#include "model_svc/server/step_watchdog.h"

#include <gtest/gtest.h>

#include <vector>

namespace llm {
namespace {

TEST(StepWatchdogTest, NotServingOnlyWhileWorkIsPendingOnAStalledLoop) {
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  engine::EngineStats stats;
  stats.heartbeat = t0;
  std::vector<bool> changes;
  StepWatchdog watchdog([&] { return stats; }, [&](bool serving) { changes.push_back(serving); },
                        absl::Seconds(5));

  // Idle, heartbeat old: an idle loop is fine whatever its heartbeat.
  EXPECT_TRUE(watchdog.Check(t0 + absl::Seconds(60)));
  // Work pending, heartbeat fresh.
  stats.waiting = 1;
  EXPECT_TRUE(watchdog.Check(t0 + absl::Seconds(4)));
  EXPECT_TRUE(changes.empty());
  // Work pending, no heartbeat for more than the limit.
  EXPECT_FALSE(watchdog.Check(t0 + absl::Seconds(6)));
  EXPECT_FALSE(watchdog.Check(t0 + absl::Seconds(7)));
  ASSERT_EQ(changes, std::vector<bool>({false}));
  // The loop goes round again.
  stats.heartbeat = t0 + absl::Seconds(7);
  stats.waiting = 0;
  stats.running = 1;
  EXPECT_TRUE(watchdog.Check(t0 + absl::Seconds(8)));
  EXPECT_EQ(changes, std::vector<bool>({false, true}));
}

TEST(StepWatchdogTest, ThreadChecksPeriodicallyAndStops) {
  engine::EngineStats stats;  // heartbeat: InfinitePast
  stats.running = 1;
  absl::Mutex mu;
  int calls = 0;
  StepWatchdog watchdog(
      [&] {
        absl::MutexLock lock(&mu);
        ++calls;
        return stats;
      },
      [](bool) {}, absl::Seconds(1));
  watchdog.Start(absl::Milliseconds(5));
  absl::SleepFor(absl::Milliseconds(100));
  watchdog.Stop();
  absl::MutexLock lock(&mu);
  EXPECT_GE(calls, 2);
}

}  // namespace
}  // namespace llm
