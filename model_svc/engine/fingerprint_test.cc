#include "model_svc/engine/fingerprint.h"

#include <string>

#include "gtest/gtest.h"
#include "model_svc/testing/random_model.h"

namespace llm::engine {
namespace {

uint64_t FingerprintOf(const model::testing::RandomModelSpec& spec) {
  absl::StatusOr<std::string> bytes = model::testing::RandomModelGguf(spec);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  auto file = gguf::File::FromBytes(*std::move(bytes));
  EXPECT_TRUE(file.ok()) << file.status();
  return ModelFingerprint(**file);
}

TEST(ModelFingerprintTest, SameFileSameFingerprintAnyChangeAnother) {
  model::testing::RandomModelSpec spec;
  const uint64_t base = FingerprintOf(spec);
  EXPECT_EQ(FingerprintOf(spec), base);

  model::testing::RandomModelSpec weights = spec;  // same metadata and table
  weights.seed = spec.seed + 1;
  EXPECT_NE(FingerprintOf(weights), base);

  model::testing::RandomModelSpec name = spec;
  name.name = "another-name";
  EXPECT_NE(FingerprintOf(name), base);

  model::testing::RandomModelSpec eps = spec;  // one float of the metadata
  eps.rms_eps = 2e-5f;
  EXPECT_NE(FingerprintOf(eps), base);

  model::testing::RandomModelSpec type = spec;  // the tensor table
  type.matrix_type = gguf::TensorType::kQ8_0;
  EXPECT_NE(FingerprintOf(type), base);
}

}  // namespace
}  // namespace llm::engine
