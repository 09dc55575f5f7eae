// Helpers of the tests that run the client library over real model server
// replicas on loopback (routing_test, migration_test, stateless_gateway_test):
// starting them, their sessions, a replica's id, a Generator over a tokenizer
// and a model target, greedy parameters, and encoding that fails the test on
// error.
#ifndef LLM_TESTS_REPLICA_TESTING_H_
#define LLM_TESTS_REPLICA_TESTING_H_

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "client/generator.h"
#include "llm/v1/model.grpc.pb.h"
#include "llm/v1/tokenizer.grpc.pb.h"
#include "tests/server_process.h"

namespace llm::testing {

// Starts a tokenizer_server of `vocab` into `state` (fails the test if it
// does not serve).
inline void StartTokenizer(ServerState<v1::Tokenizer>* state, const std::string& vocab) {
  StartServer(state, "tokenizer_server", {"--vocab", vocab}, std::chrono::seconds(60));
  ASSERT_NE(state->stub, nullptr) << state->error;
}

// Info.replica_id of the server behind `stub` ("" after a failed call, which
// fails the test).
inline std::string ReplicaId(v1::Model::Stub& stub) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::ModelInfo info;
  const grpc::Status s = stub.Info(&context, v1::ModelInfoRequest(), &info);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return info.replica_id();
}

// A Generator over `tokenizer` and `model` (a target: a list, dns:///...),
// with long timeouts for a loaded machine; null after a failure (which fails
// the test).
inline std::unique_ptr<client::Generator> ConnectGenerator(const std::string& tokenizer,
                                                           const std::string& model) {
  client::ClientOptions o;
  o.tokenizer_address = tokenizer;
  o.model_address = model;
  o.rpc_timeout = absl::Seconds(120);
  o.reconnect_timeout = absl::Seconds(30);
  absl::StatusOr<std::unique_ptr<client::Generator>> g = client::Generator::Connect(o);
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? std::move(*g) : nullptr;
}

// Greedy decoding of exactly `max_tokens` tokens (the end token ignored).
inline client::GenerateParams Greedy(int max_tokens) {
  client::GenerateParams p;
  p.sampling.temperature = 0;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  return p;
}

// `text`'s token ids (empty after a failure, which fails the test).
inline std::vector<int32_t> EncodeOrFail(client::Generator& g, const std::string& text) {
  absl::StatusOr<std::vector<int32_t>> ids = g.Encode(text);
  EXPECT_TRUE(ids.ok()) << ids.status();
  return ids.ok() ? *ids : std::vector<int32_t>{};
}

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

#endif  // LLM_TESTS_REPLICA_TESTING_H_
