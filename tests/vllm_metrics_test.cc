// The model server's metrics under vLLM's names (docs/operations.md, "Behind
// the Kubernetes inference gateway"), which the Gateway API Inference
// Extension's endpoint picker scrapes from the pod's metrics port: the real
// model_server on loopback, a known load over gRPC, then the scrape's names,
// types, labels and values.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "common/strings.h"
#include "llm/v1/model.grpc.pb.h"
#include "tests/ops_server.h"
#include "tests/server_process.h"

namespace llm {
namespace {

using ::testing::HasSubstr;
using testing::HttpGet;
using testing::OpsServer;
using testing::Sample;

// A Prefill of `tokens` on `session` ("" for a new one): the session's id.
std::string Prefill(v1::Model::Stub& stub, const std::string& session,
                    const std::vector<int>& tokens) {
  grpc::ClientContext context;
  v1::PrefillRequest request;
  request.set_session_id(session);
  for (int t : tokens) request.add_tokens(t);
  request.mutable_logits()->set_encoding(v1::LogitsOptions::LOGITS_TOP_N);
  request.mutable_logits()->set_top_n(1);
  v1::PrefillResponse response;
  const grpc::Status status = stub.Prefill(&context, request, &response);
  EXPECT_TRUE(status.ok()) << testing::Describe(status);
  return response.session_id();
}

void Decode(v1::Model::Stub& stub, const std::string& session, int token) {
  grpc::ClientContext context;
  v1::DecodeTokenRequest request;
  request.set_session_id(session);
  request.set_token(token);
  request.mutable_logits()->set_encoding(v1::LogitsOptions::LOGITS_TOP_N);
  request.mutable_logits()->set_top_n(1);
  v1::DecodeTokenResponse response;
  const grpc::Status status = stub.Decode(&context, request, &response);
  EXPECT_TRUE(status.ok()) << testing::Describe(status);
}

// The `# TYPE` of the family `name` in `scrape` ("" if absent).
std::string TypeOf(const std::string& scrape, const std::string& name) {
  std::smatch m;
  const std::regex re("(^|\n)# TYPE " + name + " (\\w+)");
  return std::regex_search(scrape, m, re) ? m[2].str() : "";
}

// Starts model_server on a random model with `flags` added; null on failure.
std::unique_ptr<OpsServer> StartModelServer(const std::string& model,
                                            const std::vector<std::string>& flags) {
  std::vector<std::string> argv = {"--model",          model,        "--kv_cache_mb", "8",
                                   "--metrics_listen", "127.0.0.1:0"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  std::string error;
  auto server = OpsServer::Start("model_server", argv, true, &error);
  EXPECT_NE(server, nullptr) << error;
  return server;
}

class VllmMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = testing::WriteRandomModel("vllm-metrics-test", 13);
    ASSERT_FALSE(model_.empty());
  }
  void TearDown() override { std::filesystem::remove(model_); }
  std::string model_;
};

TEST_F(VllmMetricsTest, NamesTypesLabelsAndValuesAfterAKnownLoad) {
  auto server = StartModelServer(model_, {"--served_model_name", "my-model"});
  ASSERT_NE(server, nullptr);
  auto channel = grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials());
  std::string error;
  ASSERT_TRUE(testing::WaitUntilServing(channel, std::chrono::seconds(60), &error)) << error;
  auto stub = v1::Model::NewStub(channel);

  const std::string before = HttpGet(server->metrics_port(), "/metrics");
  ASSERT_THAT(before, HasSubstr("200 OK"));
  const struct {
    const char* name;
    const char* type;
  } families[] = {{"vllm:num_requests_waiting", "gauge"},
                  {"vllm:num_requests_running", "gauge"},
                  {"vllm:kv_cache_usage_perc", "gauge"},
                  {"vllm:cache_config_info", "gauge"},
                  {"vllm:prefix_cache_queries_total", "counter"},
                  {"vllm:prefix_cache_hits_total", "counter"},
                  {"vllm:prompt_tokens_total", "counter"},
                  {"vllm:generation_tokens_total", "counter"},
                  {"vllm:time_to_first_token_seconds", "histogram"},
                  {"vllm:inter_token_latency_seconds", "histogram"}};
  for (const auto& f : families) EXPECT_EQ(TypeOf(before, f.name), f.type) << f.name;
  const std::string label = "{model_name=\"my-model\"}";
  EXPECT_EQ(Sample(before, "vllm:num_requests_waiting" + label), 0.0);
  EXPECT_EQ(Sample(before, "vllm:num_requests_running" + label), 0.0);
  EXPECT_EQ(Sample(before, "vllm:kv_cache_usage_perc" + label), 0.0);
  EXPECT_EQ(Sample(before, "vllm:time_to_first_token_seconds_count" + label), 0.0);

  // The load: two sessions with the same 20-token prompt (the second finds
  // its first 16-token block in the prefix cache), one of 5 tokens; two
  // decodes on each.
  std::vector<int> twenty;
  for (int t = 1; t <= 20; ++t) twenty.push_back(t);
  std::vector<std::string> sessions = {Prefill(*stub, "", twenty), Prefill(*stub, "", twenty),
                                       Prefill(*stub, "", {30, 31, 32, 33, 34})};
  for (const std::string& s : sessions) {
    Decode(*stub, s, 40);
    Decode(*stub, s, 41);
  }

  const std::string after = HttpGet(server->metrics_port(), "/metrics");
  EXPECT_EQ(Sample(after, "vllm:prompt_tokens_total" + label), 45.0 - 16.0);
  EXPECT_EQ(Sample(after, "vllm:generation_tokens_total" + label), 6.0);
  EXPECT_EQ(Sample(after, "vllm:prefix_cache_queries_total" + label), 45.0);
  EXPECT_EQ(Sample(after, "vllm:prefix_cache_hits_total" + label), 16.0);
  EXPECT_EQ(Sample(after, "vllm:time_to_first_token_seconds_count" + label), 3.0);
  EXPECT_EQ(Sample(after, "vllm:inter_token_latency_seconds_count" + label), 6.0);
  EXPECT_EQ(Sample(after, "vllm:num_requests_waiting" + label), 0.0);
  EXPECT_EQ(Sample(after, "vllm:num_requests_running" + label), 0.0);
  // The same values as the project's own names.
  EXPECT_EQ(Sample(after, "vllm:prompt_tokens_total" + label),
            Sample(after, "llm_prompt_tokens_total"));
  EXPECT_EQ(Sample(after, "vllm:time_to_first_token_seconds_sum" + label),
            Sample(after, "llm_time_to_first_token_seconds_sum"));

  // cache_config_info: the block size and the block count, value 1; the
  // usage is a whole number of those blocks, between 0 and 1.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      after, m,
      std::regex("\nvllm:cache_config_info\\{block_size=\"16\",num_gpu_blocks=\"(\\d+)\"\\} 1\n")))
      << after;
  const double blocks = std::stod(m[1].str());
  EXPECT_GT(blocks, 0.0);
  const std::optional<double> usage = Sample(after, "vllm:kv_cache_usage_perc" + label);
  ASSERT_TRUE(usage.has_value());
  EXPECT_EQ(usage, Sample(after, "llm_kv_cache_usage_perc"));
  EXPECT_GT(*usage, 0.0);
  EXPECT_LE(*usage, 1.0);
  EXPECT_NEAR(*usage * blocks, std::round(*usage * blocks), 1e-6);

  const std::optional<int> status = server->Terminate();
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(testing::ExitedZero(*status)) << testing::DescribeWaitStatus(*status);
}

// Without --served_model_name the label is the gateway's default model id:
// the file's name without .gguf (and a quantization type).
TEST_F(VllmMetricsTest, ModelNameDefaultsToTheGatewaysModelId) {
  auto server = StartModelServer(model_, {});
  ASSERT_NE(server, nullptr);
  auto channel = grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials());
  std::string error;
  ASSERT_TRUE(testing::WaitUntilServing(channel, std::chrono::seconds(60), &error)) << error;
  const std::string id = std::filesystem::path(model_).stem().string();
  EXPECT_EQ(Sample(HttpGet(server->metrics_port(), "/metrics"),
                   StrCat("vllm:num_requests_waiting{model_name=\"", id, "\"}")),
            0.0);
}

}  // namespace
}  // namespace llm
