// The main of every GoogleTest binary (llm_test in CMakeLists.txt).
//
// Exits 77 when every test that ran was skipped (GTEST_SKIP: no GPU, no
// kubectl, ...) and nothing failed, so that ctest (SKIP_RETURN_CODE 77) shows
// those as skipped. A failure in SetUpTestSuite, which GoogleTest reports by
// skipping the suite's tests, then still fails: the run's status is 1. (A
// skip regex on the output, used before, counted such failures as skips.)
#include "gmock/gmock.h"
#include "gtest/gtest.h"

int main(int argc, char** argv) {
  testing::InitGoogleMock(&argc, argv);
  const int status = RUN_ALL_TESTS();
  const testing::UnitTest& run = *testing::UnitTest::GetInstance();
  if (status == 0 && run.test_to_run_count() > 0 &&
      run.skipped_test_count() == run.test_to_run_count()) {
    return 77;
  }
  return status;
}
