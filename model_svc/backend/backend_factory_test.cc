// CreateBackend: names, the CUDA plugin's loading, and the fallbacks.
#include "model_svc/backend/backend_factory.h"

#include <string>

#include "gtest/gtest.h"

namespace llm::model {
namespace {

TEST(BackendFactory, UnknownNameIsInvalidArgument) {
  auto b = CreateBackend({.name = "tpu"});
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(b.status().message().find("cpu, cuda or auto"), std::string::npos) << b.status();
}

TEST(BackendFactory, CpuIsCpu) {
  auto b = CreateBackend({.name = "cpu", .threads = 1});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*b)->name(), "cpu");
}

// "auto" is CUDA exactly when the CUDA backend can be created here.
TEST(BackendFactory, AutoFollowsTheDevice) {
  auto b = CreateBackend({.name = "auto", .threads = 1});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*b)->name(), CudaBackendStatus().ok() ? "cuda" : "cpu");
}

// Without a usable device, "cuda" fails at once with the reason.
TEST(BackendFactory, CudaWithoutADeviceSaysWhy) {
  if (CudaBackendStatus().ok()) GTEST_SKIP() << "a CUDA device is present";
  auto b = CreateBackend({.name = "cuda"});
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(b.status().message().find("CUDA"), std::string::npos) << b.status();
}

// In a CUDA build the plugin sits beside the test binaries and loads: the
// reason CUDA is unusable here is the device, not a missing plugin.
TEST(BackendFactory, CudaPluginLoadsInACudaBuild) {
  if (!CudaBackendBuilt()) GTEST_SKIP() << "this build has no CUDA backend";
  const absl::Status s = CudaBackendStatus();
  EXPECT_EQ(s.message().find("cannot load"), std::string::npos) << s;
}

}  // namespace
}  // namespace llm::model
