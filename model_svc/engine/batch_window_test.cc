// The batching-window heuristics without an engine: the gather target, the
// gather timeout and the decode spin.
#include "model_svc/engine/batch_window.h"

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace llm::engine {
namespace {

TEST(BatchWindowTest, StartsWithNoWindow) {
  BatchWindow w;
  EXPECT_EQ(w.gather_target(), 0);
  EXPECT_FALSE(w.ShouldGather(1));
  EXPECT_EQ(w.gather_timeout(), absl::ZeroDuration());
  EXPECT_EQ(w.spin_until(), absl::InfinitePast());
}

TEST(BatchWindowTest, GathersTheLastStepsRequests) {
  BatchWindow w;
  w.Scheduled(3, {});
  EXPECT_EQ(w.gather_target(), 3);
  EXPECT_FALSE(w.ShouldGather(0));  // nothing queued: sleep for work instead
  EXPECT_TRUE(w.ShouldGather(2));
  EXPECT_FALSE(w.ShouldGather(3));
}

TEST(BatchWindowTest, CountsTheDecodersOfTheLastTwoSteps) {
  BatchWindow w;
  // Two sessions fallen out of step: one decodes a step, the other the next.
  w.Scheduled(1, {7});
  w.Scheduled(1, {8});
  EXPECT_EQ(w.gather_target(), 2);
  w.Scheduled(2, {7, 8});
  EXPECT_EQ(w.gather_target(), 2);
  w.Scheduled(1, {9});  // 7 and 8 decoded the step before: 3
  EXPECT_EQ(w.gather_target(), 3);
  w.Scheduled(1, {});
  EXPECT_EQ(w.gather_target(), 1);
}

TEST(BatchWindowTest, GatherTimeoutIsAQuarterStepAtMostTwoMilliseconds) {
  BatchWindow w;
  const absl::Time t = absl::FromUnixSeconds(1);
  w.Ran(absl::Milliseconds(4), t, false, false);
  EXPECT_EQ(w.gather_timeout(), absl::Milliseconds(1));
  w.Ran(absl::Milliseconds(40), t, false, false);
  EXPECT_EQ(w.gather_timeout(), BatchWindow::kMaxGatherWindow);
}

TEST(BatchWindowTest, SpinsOnlyAfterDecodesWithNothingQueued) {
  BatchWindow w;
  const absl::Time t = absl::FromUnixSeconds(1);
  w.Ran(absl::Milliseconds(1), t, true, false);
  EXPECT_EQ(w.spin_until(), t + BatchWindow::kDecodeSpin);
  w.Ran(absl::Milliseconds(1), t, true, true);  // a queued chunk must not wait
  EXPECT_EQ(w.spin_until(), absl::InfinitePast());
  w.Ran(absl::Milliseconds(1), t, false, false);
  EXPECT_EQ(w.spin_until(), absl::InfinitePast());
}

TEST(BatchWindowTest, SpinEndsAtTheDeadlineOrWhenTheCounterMoves) {
  std::atomic<uint64_t> counter{5};
  const absl::Time start = absl::Now();
  SpinWhileUnchanged(counter, 5, start + absl::Milliseconds(2));
  EXPECT_GE(absl::Now(), start + absl::Milliseconds(2));
  SpinWhileUnchanged(counter, 4, absl::InfiniteFuture());  // moved already
}

}  // namespace
}  // namespace llm::engine
