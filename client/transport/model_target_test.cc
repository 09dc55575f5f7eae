#include "client/transport/model_target.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "client/transport/model_pool.h"

namespace llm::client {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;

TEST(ModelTargetTest, OneAddress) {
  absl::StatusOr<ModelTarget> t = ParseModelTarget("127.0.0.1:50052");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT(t->addresses, ElementsAre("127.0.0.1:50052"));
  EXPECT_TRUE(t->dns_host.empty());
}

TEST(ModelTargetTest, ListTrimsAndDropsDuplicates) {
  absl::StatusOr<ModelTarget> t = ParseModelTarget(" a:1, b:2 ,a:1");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT(t->addresses, ElementsAre("a:1", "b:2"));
}

TEST(ModelTargetTest, DnsTarget) {
  absl::StatusOr<ModelTarget> t = ParseModelTarget("dns:///llm-model.llm.svc:50052");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(t->addresses.empty());
  EXPECT_EQ(t->dns_host, "llm-model.llm.svc");
  EXPECT_EQ(t->dns_port, "50052");
}

TEST(ModelTargetTest, BadTargetsAreInvalidArgument) {
  for (const char* bad : {"", "  ", "a:1,,b:2", "a:1,", "dns:///", "dns:///name", "dns:///:1",
                          "dns:///name:", "dns:///a:1,b:2"}) {
    EXPECT_EQ(ParseModelTarget(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(ModelTargetTest, ResolvesLocalhost) {
  absl::StatusOr<std::vector<std::string>> all = ResolveAll("localhost", "50052");
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_THAT(*all, Contains("127.0.0.1:50052"));
}

TEST(ModelTargetTest, UnresolvableNameIsUnavailable) {
  EXPECT_EQ(ResolveAll("no-such-host.invalid", "1").status().code(),
            absl::StatusCode::kUnavailable);
}

TEST(ModelPoolTest, ReplicaOfASessionId) {
  EXPECT_EQ(ModelPool::ReplicaOf("pod-0.18c2f.0123456789abcdef"), "pod-0.18c2f");
  EXPECT_EQ(ModelPool::ReplicaOf("a.b.pod.18c2f.0123456789abcdef"), "a.b.pod.18c2f");
  EXPECT_EQ(ModelPool::ReplicaOf("0123456789abcdef"), "");
}

}  // namespace
}  // namespace llm::client
