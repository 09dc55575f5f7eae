#include "model_svc/server/compute_affinity.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace llm {
namespace {

using ::testing::HasSubstr;

TEST(ComputeAffinityTest, SplitGivesTheFirstCpusToTheComputeThreads) {
  absl::StatusOr<ComputeAffinity> split = SplitCpus({2, 3, 5, 8}, 3);
  ASSERT_TRUE(split.ok()) << split.status();
  EXPECT_EQ(split->compute_cpus, (std::vector<int>{2, 3, 5}));
  EXPECT_EQ(split->other_cpus, (std::vector<int>{8}));
  EXPECT_EQ(split->all_cpus, (std::vector<int>{2, 3, 5, 8}));
}

TEST(ComputeAffinityTest, SplitLeavesACpuForTheOtherThreads) {
  for (int n : {0, 2, 3}) {
    const absl::Status s = SplitCpus({0, 1}, n).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << n;
    EXPECT_THAT(std::string(s.message()), HasSubstr("pinning needs 1 to 1 compute CPUs")) << n;
  }
}

}  // namespace
}  // namespace llm
