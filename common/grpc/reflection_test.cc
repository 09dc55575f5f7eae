#include "common/grpc/reflection.h"

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "common/grpc/reflection_testing.h"
#include "common/grpc/server_runner.h"
#include "common/strings.h"
#include "gmock/gmock.h"
#include "grpc/reflection/v1/reflection.grpc.pb.h"
#include "gtest/gtest.h"

namespace llm {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::ReflectionVersion;
using ::testing::UnorderedElementsAre;

namespace rv1 = grpc::reflection::v1;

class ReflectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto runner = ServerRunner::Start(ServerOptions(), {});
    ASSERT_TRUE(runner.ok()) << runner.status();
    runner_ = *std::move(runner);
    channel_ = grpc::CreateChannel(StrCat("127.0.0.1:", runner_->port()),
                                   grpc::InsecureChannelCredentials());
  }
  void TearDown() override {
    if (runner_ != nullptr) runner_->Shutdown(absl::ZeroDuration());
  }

  // Sends one v1 request on a stream of its own and returns the response.
  rv1::ServerReflectionResponse Ask(const rv1::ServerReflectionRequest& request) {
    auto stub = rv1::ServerReflection::NewStub(channel_);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    auto stream = stub->ServerReflectionInfo(&context);
    rv1::ServerReflectionResponse response;
    EXPECT_TRUE(stream->Write(request));
    EXPECT_TRUE(stream->Read(&response));
    stream->WritesDone();
    const grpc::Status status = stream->Finish();
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }

  std::unique_ptr<ServerRunner> runner_;
  std::shared_ptr<grpc::Channel> channel_;
};

class ReflectionVersionTest : public ReflectionTest,
                              public ::testing::WithParamInterface<ReflectionVersion> {};

// Both versions list the server's services (gRPC's health service and the
// two reflection services here), and every one of them can be described:
// gRPC 1.51's own plugin served v1alpha only, and had no descriptor for
// grpc.health.v1.Health.
TEST_P(ReflectionVersionTest, ListsAndDescribesEveryService) {
  const testing::ReflectionResult r = testing::DescribeAllServices(channel_, GetParam());
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_THAT(r.services,
              UnorderedElementsAre("grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection",
                                   "grpc.reflection.v1alpha.ServerReflection"));
  EXPECT_THAT(r.problems, IsEmpty());
  EXPECT_EQ(r.described, r.services);
  EXPECT_THAT(r.methods, Contains("grpc.health.v1.Health.Check"));
  EXPECT_THAT(r.methods, Contains("grpc.health.v1.Health.Watch"));
  EXPECT_THAT(r.methods, Contains("grpc.reflection.v1.ServerReflection.ServerReflectionInfo"));
}

INSTANTIATE_TEST_SUITE_P(BothVersions, ReflectionVersionTest,
                         ::testing::Values(ReflectionVersion::kV1, ReflectionVersion::kV1Alpha),
                         [](const auto& info) { return testing::VersionName(info.param); });

TEST_F(ReflectionTest, FileByNameEchoesTheRequestAndSendsTheFile) {
  rv1::ServerReflectionRequest request;
  request.set_host("example");
  request.set_file_by_filename("grpc/health/v1/health.proto");
  const rv1::ServerReflectionResponse response = Ask(request);
  EXPECT_EQ(response.valid_host(), "example");
  EXPECT_EQ(response.original_request().file_by_filename(), "grpc/health/v1/health.proto");
  ASSERT_EQ(response.file_descriptor_response().file_descriptor_proto_size(), 1);
  google::protobuf::FileDescriptorProto file;
  ASSERT_TRUE(file.ParseFromString(response.file_descriptor_response().file_descriptor_proto(0)));
  EXPECT_EQ(file.name(), "grpc/health/v1/health.proto");
  EXPECT_EQ(file.package(), "grpc.health.v1");
}

TEST_F(ReflectionTest, UnknownNamesAreNotFound) {
  rv1::ServerReflectionRequest request;
  request.set_file_containing_symbol("llm.v1.NoSuchService");
  rv1::ServerReflectionResponse response = Ask(request);
  ASSERT_TRUE(response.has_error_response());
  EXPECT_EQ(response.error_response().error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(response.error_response().error_message(), HasSubstr("'llm.v1.NoSuchService'"));

  request.set_file_by_filename("no/such.proto");
  response = Ask(request);
  EXPECT_EQ(response.error_response().error_code(), grpc::StatusCode::NOT_FOUND);

  request.mutable_file_containing_extension()->set_containing_type(
      "grpc.health.v1.HealthCheckRequest");
  request.mutable_file_containing_extension()->set_extension_number(100);
  response = Ask(request);
  EXPECT_EQ(response.error_response().error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(response.error_response().error_message(), HasSubstr("extension"));
}

TEST_F(ReflectionTest, ExtensionNumbersOfATypeWithoutAny) {
  rv1::ServerReflectionRequest request;
  request.set_all_extension_numbers_of_type("grpc.health.v1.HealthCheckRequest");
  const rv1::ServerReflectionResponse response = Ask(request);
  ASSERT_TRUE(response.has_all_extension_numbers_response());
  EXPECT_EQ(response.all_extension_numbers_response().base_type_name(),
            "grpc.health.v1.HealthCheckRequest");
  EXPECT_EQ(response.all_extension_numbers_response().extension_number_size(), 0);
}

TEST_F(ReflectionTest, EmptyRequestIsInvalid) {
  const rv1::ServerReflectionResponse response = Ask(rv1::ServerReflectionRequest());
  ASSERT_TRUE(response.has_error_response());
  EXPECT_EQ(response.error_response().error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(response.error_response().error_message(), HasSubstr("list_services"));
}

}  // namespace
}  // namespace llm
