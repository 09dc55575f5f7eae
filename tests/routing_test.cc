// Session-affine routing in the client library over two real model_server
// processes (the real default model) and a tokenizer_server on loopback:
//   - new sessions are spread over both replicas, every call on a session
//     reaches the replica that holds it (checked with each server's
//     ListSessions), and no session is rebuilt;
//   - SIGKILLing the replica of a session in the middle of its generation
//     loses only that replica's sessions: the client rebuilds the session on
//     the other replica and the greedy output is the one it gives without
//     the kill; sessions on the survivor go on untouched;
//   - a dns:/// target resolves to the replicas;
//   - on one server with --max_sessions 4, idle sessions give way to new ones
//     (least recently used first, counted in
//     llm_sessions_evicted_total{reason="max_sessions"}) instead of locking
//     new callers out, and the client rebuilds an evicted one at its next
//     use.
//
// Needs models/SmolLM2-135M-Instruct.Q4_1.gguf (scripts/fetch-model.sh).
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "client/generator.h"
#include "client/transport/model_client.h"
#include "client/transport/tokenizer_client.h"
#include "common/strings.h"
#include "common/test_paths.h"
#include "llm/v1/model.grpc.pb.h"
#include "llm/v1/tokenizer.grpc.pb.h"
#include "tests/ops_server.h"
#include "tests/replica_testing.h"
#include "tests/server_process.h"

namespace llm {
namespace {

using testing::ListSessions;
using ::testing::StartsWith;

std::string ModelPath() { return testing::SourceDir() + "/models/SmolLM2-135M-Instruct.Q4_1.gguf"; }

using testing::Greedy;
using testing::ReplicaId;

class RoutingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(ModelPath())) GTEST_SKIP() << "missing " << ModelPath();
    const char* pods[] = {"pod-a", "pod-b"};
    testing::StartTokenizerAndReplicas(ModelPath(), &tokenizer_, models_, {pods[0], pods[1]});
    ASSERT_NE(tokenizer_.stub, nullptr) << tokenizer_.error;
    for (int i = 0; i < 2; ++i) {
      ASSERT_NE(models_[i].stub, nullptr) << models_[i].error;
      replica_[i] = ReplicaId(*models_[i].stub);
      ASSERT_THAT(replica_[i], StartsWith(StrCat(pods[i], ".")));
    }
  }

  std::unique_ptr<client::Generator> Connect(const std::string& model_address) {
    return testing::ConnectGenerator(tokenizer_.process->address(), model_address);
  }
  std::string BothAddresses() const {
    return StrCat(models_[0].process->address(), ",", models_[1].process->address());
  }
  // Which server (0 or 1) holds `session_id`, by its replica id; -1: neither.
  int Owner(const std::string& session_id) const {
    for (int i = 0; i < 2; ++i) {
      if (session_id.rfind(replica_[i] + ".", 0) == 0) return i;
    }
    return -1;
  }
  std::vector<int32_t> Encode(client::Generator& g, const std::string& text) {
    return testing::EncodeOrFail(g, text);
  }

  testing::ServerState<v1::Tokenizer> tokenizer_;
  testing::ServerState<v1::Model> models_[2];
  std::string replica_[2];
};

TEST_F(RoutingTest, SpreadsNewSessionsAndSendsEveryCallToItsReplica) {
  std::unique_ptr<client::Generator> g = Connect(BothAddresses());
  ASSERT_NE(g, nullptr);
  ASSERT_EQ(g->services().grpc_model()->pool().size(), 2u);
  const std::vector<std::string> prompts = {"The sea is", "A lighthouse", "Once upon a time",
                                            "The capital of France"};
  std::vector<client::Session> sessions(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    absl::StatusOr<client::GenerateResult> r =
        g->Generate(sessions[i], Encode(*g, prompts[i]), Greedy(6), nullptr);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->session_rebuilds, 0);
  }
  // A second call on every session (Prefill on the session, then its stream).
  for (client::Session& s : sessions) {
    const std::string before = s.id;
    absl::StatusOr<client::GenerateResult> r =
        g->Generate(s, Encode(*g, " and"), Greedy(4), nullptr);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->session_rebuilds, 0);
    EXPECT_EQ(s.id, before);
  }
  // Each server holds two of them, the ones whose ids name it, with every
  // token the client sent: a call that reached the other server would have
  // failed (NOT_FOUND) and rebuilt the session.
  int per_server[2] = {0, 0};
  for (const client::Session& s : sessions) {
    const int owner = Owner(s.id);
    ASSERT_GE(owner, 0) << s.id;
    ++per_server[owner];
  }
  EXPECT_EQ(per_server[0], 2);
  EXPECT_EQ(per_server[1], 2);
  for (int i = 0; i < 2; ++i) {
    std::map<std::string, v1::SessionInfo> held;
    for (const v1::SessionInfo& info : ListSessions(*models_[i].stub)) {
      EXPECT_THAT(info.session_id(), StartsWith(replica_[i] + "."));
      held[info.session_id()] = info;
    }
    EXPECT_EQ(held.size(), 2u);
    for (const client::Session& s : sessions) {
      if (Owner(s.id) != i) continue;
      ASSERT_TRUE(held.contains(s.id)) << s.id << " not on server " << i;
      EXPECT_EQ(held[s.id].num_tokens(), static_cast<int64_t>(s.tokens.size()));
      EXPECT_GT(held[s.id].decoded_tokens(), 0);
    }
  }
  // The generator's own view agrees.
  absl::StatusOr<v1::ListSessionsResponse> all = g->services().grpc_model()->ListSessions();
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->sessions_size(), 4);
}

TEST_F(RoutingTest, KillingAReplicaLosesOnlyItsSessionsAndGenerationGoesOn) {
  std::unique_ptr<client::Generator> g = Connect(BothAddresses());
  ASSERT_NE(g, nullptr);
  const std::vector<int32_t> prompt = Encode(*g, "Lighthouses guide ships because");
  constexpr int kTokens = 24;
  // The reference, on one replica; the next session goes to the other.
  client::Session reference;
  absl::StatusOr<client::GenerateResult> expected =
      g->Generate(reference, prompt, Greedy(kTokens), nullptr);
  ASSERT_TRUE(expected.ok()) << expected.status();
  const int survivor = Owner(reference.id);
  ASSERT_GE(survivor, 0);
  const int victim = 1 - survivor;

  // The same prompt on the other replica, SIGKILLed after the 8th token.
  client::Session session;
  int seen = 0;
  bool killed = false;
  absl::StatusOr<client::GenerateResult> result =
      g->Generate(session, prompt, Greedy(kTokens), [&](const client::TokenEvent& e) {
        if (e.token < 0 || ++seen != 8) return;
        EXPECT_EQ(Owner(session.id), victim);
        models_[victim].stub.reset();
        models_[victim].process->Terminate(std::chrono::seconds(30), SIGKILL);
        killed = true;
      });
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_TRUE(killed);
  EXPECT_GE(result->session_rebuilds, 1);
  EXPECT_EQ(result->tokens, expected->tokens);
  EXPECT_EQ(result->text, expected->text);
  // Rebuilt on the survivor, with the whole history.
  EXPECT_EQ(Owner(session.id), survivor);
  bool found = false;
  for (const v1::SessionInfo& info : ListSessions(*models_[survivor].stub)) {
    if (info.session_id() != session.id) continue;
    found = true;
    EXPECT_EQ(info.num_tokens(), static_cast<int64_t>(session.tokens.size()));
  }
  EXPECT_TRUE(found);

  // The survivor's session was not lost, and new sessions go there now.
  const std::string reference_id = reference.id;
  absl::StatusOr<client::GenerateResult> more =
      g->Generate(reference, Encode(*g, " Also,"), Greedy(4), nullptr);
  ASSERT_TRUE(more.ok()) << more.status();
  EXPECT_EQ(more->session_rebuilds, 0);
  EXPECT_EQ(reference.id, reference_id);
  for (int i = 0; i < 2; ++i) {
    client::Session fresh;
    absl::StatusOr<client::GenerateResult> r = g->Generate(fresh, prompt, Greedy(2), nullptr);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->session_rebuilds, 0);
    EXPECT_EQ(Owner(fresh.id), survivor);
  }
}

TEST_F(RoutingTest, DnsTargetResolvesToTheReplicas) {
  // localhost resolves to 127.0.0.1 (and maybe ::1, where nothing listens:
  // that endpoint is simply down).
  const std::string target = StrCat("dns:///localhost:", models_[0].process->port());
  std::unique_ptr<client::Generator> g = Connect(target);
  ASSERT_NE(g, nullptr);
  client::Session session;
  absl::StatusOr<client::GenerateResult> r =
      g->Generate(session, Encode(*g, "Hello"), Greedy(3), nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Owner(session.id), 0);
}

// ---------------------------------------------------------------------------
// The session limit: one model_server holding 4 sessions.

constexpr int kMaxSessions = 4;

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
