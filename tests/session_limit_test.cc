// The model server's session limit end to end: idle sessions give way to new
// ones (least recently used first, counted in
// llm_sessions_evicted_total{reason="max_sessions"}) instead of locking every
// new caller out, and the owner of an evicted session rebuilds it at its next
// use. The real tokenizer_server and model_server (--max_sessions 4, the real
// default model) on loopback, driven through the client library.
//
// Needs models/SmolLM2-135M-Instruct.Q4_1.gguf (scripts/fetch-model.sh).
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "client/generator.h"
#include "common/strings.h"
#include "common/test_paths.h"
#include "llm/v1/model.grpc.pb.h"
#include "tests/ops_server.h"
#include "tests/server_process.h"

namespace llm {
namespace {

constexpr int kMaxSessions = 4;

std::string ModelPath() { return testing::SourceDir() + "/models/SmolLM2-135M-Instruct.Q4_1.gguf"; }

client::GenerateParams Greedy(int max_tokens) {
  client::GenerateParams p;
  p.sampling.temperature = 0;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;  // a fixed length, whatever the model says
  return p;
}

class SessionLimitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(ModelPath())) GTEST_SKIP() << "missing " << ModelPath();
    std::string error;
    tokenizer_ =
        testing::ServerProcess::Start("tokenizer_server", {"--vocab", ModelPath()}, &error);
    ASSERT_NE(tokenizer_, nullptr) << error;
    model_ = testing::OpsServer::Start(
        "model_server",
        {"--model", ModelPath(), "--kv_cache_mb", "32", "--threads", "1", "--max_sessions",
         StrCat(kMaxSessions), "--metrics_listen", "127.0.0.1:0"},
        /*want_metrics=*/true, &error);
    ASSERT_NE(model_, nullptr) << error;
    for (const std::string& address : {tokenizer_->address(), model_->address()}) {
      auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
      ASSERT_TRUE(testing::WaitUntilServing(channel, std::chrono::seconds(120), &error)) << error;
    }
    stub_ = v1::Model::NewStub(
        grpc::CreateChannel(model_->address(), grpc::InsecureChannelCredentials()));
    client::ClientOptions o;
    o.tokenizer_address = tokenizer_->address();
    o.model_address = model_->address();
    o.rpc_timeout = absl::Seconds(120);
    absl::StatusOr<std::unique_ptr<client::Generator>> g = client::Generator::Connect(o);
    ASSERT_TRUE(g.ok()) << g.status();
    generator_ = std::move(*g);
  }

  std::vector<int32_t> Encode(const std::string& text) {
    absl::StatusOr<std::vector<int32_t>> ids = generator_->Encode(text);
    EXPECT_TRUE(ids.ok()) << ids.status();
    return ids.ok() ? *ids : std::vector<int32_t>{};
  }
  // The ids of the sessions the model server holds.
  std::set<std::string> Held() {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::ListSessionsResponse response;
    const grpc::Status s = stub_->ListSessions(&context, v1::ListSessionsRequest(), &response);
    EXPECT_TRUE(s.ok()) << s.error_message();
    std::set<std::string> ids;
    for (const v1::SessionInfo& info : response.sessions()) ids.insert(info.session_id());
    return ids;
  }
  std::optional<double> Evicted(const std::string& reason) {
    return testing::Sample(testing::HttpGet(model_->metrics_port(), "/metrics"),
                           StrCat("llm_sessions_evicted_total{reason=\"", reason, "\"}"));
  }

  std::unique_ptr<testing::ServerProcess> tokenizer_;
  std::unique_ptr<testing::OpsServer> model_;
  std::unique_ptr<v1::Model::Stub> stub_;
  std::unique_ptr<client::Generator> generator_;
};

// Six idle conversations on a server that holds four sessions: every new
// one is served (it used to get RESOURCE_EXHAUSTED from the fifth on, for the
// whole session TTL), the two least recently used give way, and the first
// conversation's next call rebuilds its session with the same output as a
// session that was never evicted.
TEST_F(SessionLimitTest, IdleSessionsGiveWayAndTheirOwnersRebuildThem) {
  const std::vector<std::string> prompts = {"The sea is",     "A lighthouse", "Once upon a time",
                                            "The capital of", "My favourite", "In the morning"};
  std::vector<client::Session> sessions(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    absl::StatusOr<client::GenerateResult> r =
        generator_->Generate(sessions[i], Encode(prompts[i]), Greedy(3), nullptr);
    ASSERT_TRUE(r.ok()) << "conversation " << i << ": " << r.status();
    EXPECT_EQ(r->session_rebuilds, 0);
  }
  std::set<std::string> expected;
  for (size_t i = 2; i < sessions.size(); ++i) expected.insert(sessions[i].id);
  EXPECT_EQ(Held(), expected) << "not the four most recently used sessions";
  EXPECT_EQ(Evicted("max_sessions"), 2.0);
  EXPECT_EQ(Evicted("kv_cache"), 0.0);

  // The first conversation goes on: its session is rebuilt from the history.
  const std::vector<int32_t> more = Encode(" and then");
  std::vector<int32_t> history = sessions[0].tokens;
  history.insert(history.end(), sessions[0].pending.begin(), sessions[0].pending.end());
  history.insert(history.end(), more.begin(), more.end());
  const std::string lost_id = sessions[0].id;
  absl::StatusOr<client::GenerateResult> resumed =
      generator_->Generate(sessions[0], more, Greedy(6), nullptr);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_GE(resumed->session_rebuilds, 1);
  EXPECT_NE(sessions[0].id, lost_id);
  EXPECT_TRUE(Held().contains(sessions[0].id));
  EXPECT_EQ(Evicted("max_sessions"), 3.0);

  client::Session fresh;
  absl::StatusOr<client::GenerateResult> reference =
      generator_->Generate(fresh, history, Greedy(6), nullptr);
  ASSERT_TRUE(reference.ok()) << reference.status();
  EXPECT_EQ(reference->session_rebuilds, 0);
  EXPECT_EQ(resumed->tokens, reference->tokens);
  EXPECT_EQ(resumed->text, reference->text);
}

}  // namespace
}  // namespace llm
