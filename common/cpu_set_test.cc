#include "common/cpu_set.h"

#include <thread>

#include "gtest/gtest.h"

namespace llm {
namespace {

TEST(CpuSetTest, APinnedThreadRunsOnItsCpusAndItsChildrenStartThere) {
  absl::StatusOr<std::vector<int>> allowed = ThisThreadCpus();
  ASSERT_TRUE(allowed.ok()) << allowed.status();
  ASSERT_FALSE(allowed->empty());
  const std::vector<int> last = {allowed->back()};
  absl::StatusOr<std::vector<int>> pinned, child;
  std::thread t([&] {
    ASSERT_TRUE(PinThisThread(last).ok());
    pinned = ThisThreadCpus();
    std::thread([&] { child = ThisThreadCpus(); }).join();
  });
  t.join();
  ASSERT_TRUE(pinned.ok() && child.ok());
  EXPECT_EQ(*pinned, last);
  EXPECT_EQ(*child, last);
  EXPECT_EQ(*ThisThreadCpus(), *allowed);  // the caller is where it was
}

TEST(CpuSetTest, BadSetsAreRefused) {
  EXPECT_EQ(PinThisThread({}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PinThisThread({-1}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PinThisThread({CPU_SETSIZE}).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace llm
