// Test support: calls on a model server's stub that integration tests share.
#ifndef LLM_TESTS_MODEL_CALLS_H_
#define LLM_TESTS_MODEL_CALLS_H_

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "llm/v1/model.grpc.pb.h"

namespace llm::testing {

// The sessions the server holds (a failed call fails the test: none).
inline std::vector<v1::SessionInfo> ListSessions(v1::Model::Stub& stub) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::ListSessionsResponse response;
  const grpc::Status s = stub.ListSessions(&context, v1::ListSessionsRequest(), &response);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return {response.sessions().begin(), response.sessions().end()};
}

}  // namespace llm::testing

#endif  // LLM_TESTS_MODEL_CALLS_H_
