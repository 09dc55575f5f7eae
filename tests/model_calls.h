// Test support: calls on a model server's stub that integration tests share.
#ifndef LLM_TESTS_MODEL_CALLS_H_
#define LLM_TESTS_MODEL_CALLS_H_

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "llm/v1/model.grpc.pb.h"
#include "llm/v1/tokenizer.grpc.pb.h"
#include "tests/server_process.h"

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

// Starts tokenizer_server (the vocabulary of `model_path`) and one
// model_server of `model_path` per pod name (--pod_name pods[i], 32 MiB of
// KV cache, one thread, a 1 s drain) into models[i]; the stubs of those that
// failed stay null (their `error` says why).
inline void StartTokenizerAndReplicas(const std::string& model_path,
                                      ServerState<v1::Tokenizer>* tokenizer,
                                      ServerState<v1::Model>* models,
                                      const std::vector<std::string>& pods) {
  StartServer(tokenizer, "tokenizer_server", {"--vocab", model_path}, std::chrono::seconds(60));
  for (size_t i = 0; i < pods.size(); ++i) {
    StartServer(&models[i], "model_server",
                {"--model", model_path, "--kv_cache_mb", "32", "--threads", "1", "--pod_name",
                 pods[i], "--drain_seconds", "1"},
                std::chrono::seconds(120));
  }
}

}  // namespace llm::testing

#endif  // LLM_TESTS_MODEL_CALLS_H_
