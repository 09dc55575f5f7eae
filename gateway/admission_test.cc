#include "gateway/admission.h"

#include <atomic>
#include <optional>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace llm::gateway {
namespace {

TEST(AdmissionTest, AdmitsUpToTheLimitThenRefusesWithoutAQueue) {
  Admission admission({.max_active = 2, .max_queued = 0, .queue_timeout = absl::Seconds(1)});
  absl::StatusOr<Admission::Ticket> a = admission.Enter();
  absl::StatusOr<Admission::Ticket> b = admission.Enter();
  ASSERT_TRUE(a.ok() && b.ok());
  absl::StatusOr<Admission::Ticket> c = admission.Enter();
  ASSERT_EQ(c.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(c.status().message().find("2 requests generating"), std::string::npos) << c.status();
  EXPECT_NE(c.status().message().find("--max_queued 0"), std::string::npos);
  EXPECT_EQ(admission.active(), 2);
}

TEST(AdmissionTest, ATicketGivesItsPlaceBack) {
  Admission admission({.max_active = 1, .max_queued = 0});
  { ASSERT_TRUE(admission.Enter().ok()); }
  EXPECT_EQ(admission.active(), 0);
  EXPECT_TRUE(admission.Enter().ok());
}

// A waiting request gets the place of the one that finishes.
TEST(AdmissionTest, AQueuedRequestIsAdmittedWhenAPlaceFrees) {
  Admission admission({.max_active = 1, .max_queued = 4, .queue_timeout = absl::Hours(1)});
  std::optional<Admission::Ticket> first(*admission.Enter());
  std::atomic<bool> admitted{false};
  std::thread waiter([&] {
    absl::StatusOr<Admission::Ticket> t = admission.Enter();
    EXPECT_TRUE(t.ok()) << t.status();
    admitted = true;
  });
  while (admission.queued() == 0) std::this_thread::yield();
  EXPECT_FALSE(admitted.load());
  first.reset();
  waiter.join();
  EXPECT_TRUE(admitted.load());
}

TEST(AdmissionTest, AFullQueueRefusesAtOnce) {
  Admission admission({.max_active = 1, .max_queued = 1, .queue_timeout = absl::Hours(1)});
  std::optional<Admission::Ticket> first(*admission.Enter());
  std::thread waiter([&] { EXPECT_TRUE(admission.Enter().ok()); });
  while (admission.queued() == 0) std::this_thread::yield();
  absl::StatusOr<Admission::Ticket> refused = admission.Enter();
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("1 request waiting"), std::string::npos)
      << refused.status();
  first.reset();
  waiter.join();
}

TEST(AdmissionTest, TheWaitRunsOut) {
  Admission admission({.max_active = 1, .max_queued = 1, .queue_timeout = absl::Milliseconds(1)});
  std::optional<Admission::Ticket> first(*admission.Enter());
  absl::StatusOr<Admission::Ticket> late = admission.Enter();
  EXPECT_EQ(late.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(late.status().message().find("--queue_timeout"), std::string::npos) << late.status();
  EXPECT_EQ(admission.queued(), 0);
}

// First come, first served: waiters are admitted in arrival order.
TEST(AdmissionTest, WaitersAreAdmittedInOrder) {
  Admission admission({.max_active = 1, .max_queued = 8, .queue_timeout = absl::Hours(1)});
  std::optional<Admission::Ticket> first(*admission.Enter());
  std::vector<int> order;
  std::mutex order_mu;
  std::vector<std::thread> waiters;
  for (int i = 0; i < 4; ++i) {
    waiters.emplace_back([&, i] {
      absl::StatusOr<Admission::Ticket> t = admission.Enter();
      ASSERT_TRUE(t.ok());
      std::lock_guard<std::mutex> lock(order_mu);
      order.push_back(i);
    });
    while (admission.queued() != i + 1) std::this_thread::yield();
  }
  first.reset();
  for (std::thread& t : waiters) t.join();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3}));
}

TEST(AdmissionTest, StopWakesTheQueue) {
  Admission admission({.max_active = 1, .max_queued = 2, .queue_timeout = absl::Hours(1)});
  std::optional<Admission::Ticket> first(*admission.Enter());
  std::thread waiter(
      [&] { EXPECT_EQ(admission.Enter().status().code(), absl::StatusCode::kUnavailable); });
  while (admission.queued() == 0) std::this_thread::yield();
  admission.Stop();
  waiter.join();
  EXPECT_EQ(admission.Enter().status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace llm::gateway
