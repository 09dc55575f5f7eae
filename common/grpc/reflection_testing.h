// Test support: a server reflection client that does what grpcurl does with
// `list` and `describe`, over grpc.reflection.v1 or v1alpha: lists the
// services, asks for the file containing each one, and builds the service
// from the files the server sent (the file and its imports) in a descriptor
// pool of its own. Used by reflection_test.cc and by the servers'
// integration tests (tests/), which link llm_grpc_protos.
#ifndef LLM_COMMON_GRPC_REFLECTION_TESTING_H_
#define LLM_COMMON_GRPC_REFLECTION_TESTING_H_

#include <gmock/gmock.h>
#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/descriptor_database.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "common/strings.h"
#include "grpc/reflection/v1/reflection.grpc.pb.h"
#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"

namespace llm::testing {

enum class ReflectionVersion { kV1, kV1Alpha };

inline const char* VersionName(ReflectionVersion v) {
  return v == ReflectionVersion::kV1 ? "v1" : "v1alpha";
}

struct ReflectionResult {
  grpc::Status status;                 // of the stream, or what went wrong
  std::vector<std::string> services;   // list_services
  std::vector<std::string> described;  // services rebuilt from the files sent
  std::vector<std::string> problems;   // why the others were not, one each
  // The methods of every described service, "pkg.Service.Method".
  std::vector<std::string> methods;
};

namespace internal {

// One version: `Api` is grpc::reflection::v1 or v1alpha's ServerReflection,
// `Request` and `Response` its messages.
template <typename Api, typename Request, typename Response>
ReflectionResult DescribeAll(const std::shared_ptr<grpc::Channel>& channel) {
  namespace pb = google::protobuf;
  ReflectionResult result;
  auto stub = Api::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  auto stream = stub->ServerReflectionInfo(&context);
  const auto finish = [&](const std::string& failure) {
    stream->WritesDone();
    Response ignored;
    while (stream->Read(&ignored)) {
    }
    result.status = stream->Finish();
    if (result.status.ok() && !failure.empty()) {
      result.status = grpc::Status(grpc::StatusCode::INTERNAL, failure);
    }
    return result;
  };
  Request request;
  request.set_list_services("");
  Response response;
  if (!stream->Write(request) || !stream->Read(&response)) return finish("no list_services answer");
  if (!response.has_list_services_response()) {
    return finish(StrCat("list_services answered ", response.ShortDebugString()));
  }
  for (const auto& s : response.list_services_response().service()) {
    result.services.push_back(s.name());
  }
  for (const std::string& name : result.services) {
    request.set_file_containing_symbol(name);
    if (!stream->Write(request) || !stream->Read(&response)) {
      return finish(StrCat("no answer for ", name));
    }
    if (!response.has_file_descriptor_response()) {
      result.problems.push_back(StrCat(name, ": ", response.error_response().error_message()));
      continue;
    }
    pb::SimpleDescriptorDatabase files;
    for (const std::string& bytes : response.file_descriptor_response().file_descriptor_proto()) {
      pb::FileDescriptorProto file;
      if (!file.ParseFromString(bytes) || !files.Add(file)) {
        result.problems.push_back(StrCat(name, ": a bad or repeated file"));
      }
    }
    pb::DescriptorPool pool(&files);
    const pb::ServiceDescriptor* service = pool.FindServiceByName(name);
    if (service == nullptr) {
      result.problems.push_back(StrCat(name, ": not in the files sent (or an import missing)"));
      continue;
    }
    result.described.push_back(name);
    for (int i = 0; i < service->method_count(); ++i) {
      result.methods.push_back(service->method(i)->full_name());
    }
  }
  return finish("");
}

}  // namespace internal

inline ReflectionResult DescribeAllServices(const std::shared_ptr<grpc::Channel>& channel,
                                            ReflectionVersion version) {
  namespace v1 = grpc::reflection::v1;
  namespace v1alpha = grpc::reflection::v1alpha;
  if (version == ReflectionVersion::kV1) {
    return internal::DescribeAll<v1::ServerReflection, v1::ServerReflectionRequest,
                                 v1::ServerReflectionResponse>(channel);
  }
  return internal::DescribeAll<v1alpha::ServerReflection, v1alpha::ServerReflectionRequest,
                               v1alpha::ServerReflectionResponse>(channel);
}

// Both versions list `service` and describe every service they list, with
// `method` ("pkg.Service.Method") among the methods.
inline void ExpectReflectionDescribesEveryService(const std::shared_ptr<grpc::Channel>& channel,
                                                  const std::string& service,
                                                  const std::string& method) {
  for (ReflectionVersion version : {ReflectionVersion::kV1, ReflectionVersion::kV1Alpha}) {
    SCOPED_TRACE(StrCat("grpc.reflection.", VersionName(version)));
    const ReflectionResult r = DescribeAllServices(channel, version);
    ASSERT_TRUE(r.status.ok()) << r.status.error_code() << ": " << r.status.error_message();
    EXPECT_THAT(r.services, ::testing::Contains(service));
    EXPECT_THAT(r.services, ::testing::Contains("grpc.health.v1.Health"));
    EXPECT_THAT(r.problems, ::testing::IsEmpty());
    EXPECT_EQ(r.described, r.services);
    EXPECT_THAT(r.methods, ::testing::Contains(method));
  }
}

}  // namespace llm::testing

#endif  // LLM_COMMON_GRPC_REFLECTION_TESTING_H_
