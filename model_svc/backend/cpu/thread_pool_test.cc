// The thread pool's placement: a pool made with a CPU set runs its workers
// there, read from inside a loop on each worker.
#include "model_svc/backend/cpu/thread_pool.h"

#include <vector>

#include "absl/status/statusor.h"
#include "common/cpu_set.h"
#include "gtest/gtest.h"

namespace llm::cpu {
namespace {

// Each thread's CPUs as the pool's loop sees them, by thread index.
std::vector<std::vector<int>> CpusOfEveryThread(ThreadPool& pool) {
  std::vector<std::vector<int>> cpus(pool.num_threads());
  pool.Run([&](int index, int) {
    absl::StatusOr<std::vector<int>> mine = ThisThreadCpus();
    if (mine.ok()) cpus[index] = *mine;
  });
  return cpus;
}

TEST(ThreadPoolTest, APoolMadeWithACpuSetRunsItsWorkersThere) {
  const absl::StatusOr<std::vector<int>> allowed = ThisThreadCpus();
  ASSERT_TRUE(allowed.ok()) << allowed.status();
  const std::vector<int> last = {allowed->back()};
  ThreadPool pool(3, last);
  ASSERT_TRUE(pool.placement().ok()) << pool.placement();
  const std::vector<std::vector<int>> cpus = CpusOfEveryThread(pool);
  EXPECT_EQ(cpus[0], *allowed);  // the caller: its owner places it
  EXPECT_EQ(cpus[1], last);
  EXPECT_EQ(cpus[2], last);
}

TEST(ThreadPoolTest, WithoutACpuSetTheWorkersRunWhereTheirCreatorDoes) {
  const absl::StatusOr<std::vector<int>> allowed = ThisThreadCpus();
  ASSERT_TRUE(allowed.ok()) << allowed.status();
  ThreadPool pool(2);
  EXPECT_TRUE(pool.placement().ok());
  EXPECT_EQ(CpusOfEveryThread(pool)[1], *allowed);
}

TEST(ThreadPoolTest, ARefusedCpuSetIsReported) {
  ThreadPool pool(2, {-1});
  EXPECT_EQ(pool.placement().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CpusOfEveryThread(pool).size(), 2u);  // it still runs loops
}

}  // namespace
}  // namespace llm::cpu
