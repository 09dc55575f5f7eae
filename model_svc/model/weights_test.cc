// LocateWeights' checks that guard allocations (found by model_load_fuzzer).
#include "model_svc/model/weights.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model_svc/testing/random_model.h"

namespace llm::model {
namespace {

TEST(WeightsTest, BlockCountTheTensorsCannotBackIsAnError) {
  testing::RandomModelSpec spec;
  spec.layers = 1000000;  // metadata only: no layer tensors at all
  spec.config_only = true;
  auto file = testing::RandomModelFile(spec);
  ASSERT_TRUE(file.ok()) << file.status();
  auto config = ModelConfig::FromGguf(**file);
  ASSERT_TRUE(config.ok()) << config.status();
  auto weights = LocateWeights(**file, *config);
  EXPECT_EQ(weights.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(weights.status().message()),
              ::testing::HasSubstr("block_count 1000000 needs at least 6000000 layer tensors"));
}

}  // namespace
}  // namespace llm::model
