// Stateless gateways over several model replicas (issue 30): two real
// model_server processes (the default model) and llm_gateway processes on
// loopback.
//   - Two gateways given the replicas in OPPOSITE orders: a conversation's
//     (X-Session-Id) turn 1 through gateway 1, which then stops; turn 2
//     through gateway 2 lands on the replica that holds turn 1's named
//     session (the rendezvous winner of its name over the pods: one
//     session in all, on it), computes only the new turn's tokens (its
//     prefilled tokens grow by what the session lacked; the gateway's
//     llm_gateway_conversation_tokens_total says kept and computed), and
//     answers what a single gateway answers for the same conversation
//     (greedy).
//   - A conversation streaming through one gateway gets 409 through the
//     other (its named session is busy on the model server).
//   - Prefix-aware placement of new sessions (ModelPool::
//     ForNewSessionWithPrompt) over the two servers.
//   - ModelPool::ForNamedSession: pools given the replicas in opposite
//     orders place every name on the same replica, and names spread over
//     both.
//   - The model service's sync_history over gRPC: creation under a name,
//     kept_tokens, and INVALID_ARGUMENT for a bad or empty name and for
//     truncate_to.
//
// Needs models/SmolLM2-135M-Instruct.Q4_1.gguf (scripts/fetch-model.sh).
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "client/transport/model_client.h"
#include "client/transport/model_pool.h"
#include "common/rendezvous.h"
#include "common/strings.h"
#include "common/test_paths.h"
#include "llm/v1/model.grpc.pb.h"
#include "llm/v1/tokenizer.grpc.pb.h"
#include "nlohmann/json.hpp"
#include "tests/http_client.h"
#include "tests/replica_testing.h"
#include "tests/server_process.h"

namespace llm {
namespace {

using nlohmann::json;
using testing::Http;
using testing::HttpResponse;
using testing::ListSessions;
using testing::ServerProcess;
using ::testing::StartsWith;

std::string ModelPath() { return testing::SourceDir() + "/models/SmolLM2-135M-Instruct.Q4_1.gguf"; }

// The sum of a Prometheus counter's samples whose line starts with `prefix`.
double Counter(const std::string& metrics, const std::string& prefix) {
  double sum = 0;
  size_t pos = 0;
  while ((pos = metrics.find(prefix, pos)) != std::string::npos) {
    if (pos == 0 || metrics[pos - 1] == '\n') {
      sum += std::stod(metrics.substr(metrics.find(' ', pos) + 1));
    }
    pos += prefix.size();
  }
  return sum;
}

class StatelessGatewayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(ModelPath())) GTEST_SKIP() << "missing " << ModelPath();
    testing::StartTokenizerAndReplicas(ModelPath(), &tokenizer_, models_, {kPods[0], kPods[1]});
    ASSERT_NE(tokenizer_.stub, nullptr) << tokenizer_.error;
    for (int i = 0; i < 2; ++i) ASSERT_NE(models_[i].stub, nullptr) << models_[i].error;
  }

  std::string Addresses(int first) const {
    return StrCat(models_[first].process->address(), ",", models_[1 - first].process->address());
  }
  std::unique_ptr<ServerProcess> StartGateway(int first) {
    std::string error;
    std::unique_ptr<ServerProcess> gw =
        ServerProcess::Start("llm_gateway",
                             {"--tokenizer", tokenizer_.process->address(), "--model",
                              Addresses(first), "--timeout", "120"},
                             &error);
    EXPECT_NE(gw, nullptr) << error;
    return gw;
  }
  // Which server (0 or 1) rendezvous hashing gives `name`.
  static int Winner(const std::string& name) {
    const std::vector<std::string> pods = {kPods[0], kPods[1]};
    return static_cast<int>(RendezvousOrder(name, pods).front());
  }

  static constexpr const char* kPods[2] = {"pod-a", "pod-b"};
  testing::ServerState<v1::Tokenizer> tokenizer_;
  testing::ServerState<v1::Model> models_[2];
};

json Ask(int port, const json& messages, const std::string& conversation) {
  const HttpResponse r = Http(port, "POST", "/v1/chat/completions",
                              json{{"model", "SmolLM2-135M-Instruct"},
                                   {"messages", messages},
                                   {"temperature", 0},
                                   {"max_tokens", 24}}
                                  .dump(),
                              StrCat("X-Session-Id: ", conversation, "\r\n"));
  EXPECT_EQ(r.status, 200) << r.body;
  return r.Json();
}

std::string Answer(const json& response) {
  return response["choices"][0]["message"]["content"].get<std::string>();
}

TEST_F(StatelessGatewayTest, TurnTwoThroughAnotherGatewayFindsTurnOnesSession) {
  const std::string conversation = "stateless-1";
  const std::string name = "conv-" + conversation;
  const int winner = Winner(name);
  json messages = json::array({{{"role", "user"}, {"content", "What is the capital of France?"}}});

  // Turn 1 through gateway 1 (replicas in order 0, 1), which then stops.
  std::unique_ptr<ServerProcess> gw1 = StartGateway(0);
  ASSERT_NE(gw1, nullptr);
  const json turn1 = Ask(gw1->port(), messages, conversation);
  ASSERT_TRUE(turn1.contains("choices")) << turn1.dump();
  gw1->Terminate(std::chrono::seconds(15));
  gw1.reset();

  std::vector<v1::SessionInfo> held = ListSessions(*models_[winner].stub);
  ASSERT_EQ(held.size(), 1u);
  EXPECT_EQ(held[0].session_id(), name);
  EXPECT_TRUE(ListSessions(*models_[1 - winner].stub).empty());
  const int64_t n1 = held[0].num_tokens();
  const int64_t prefilled1 = held[0].prefilled_tokens();

  // Turn 2 through gateway 2 (replicas in order 1, 0).
  messages.push_back({{"role", "assistant"}, {"content", Answer(turn1)}});
  messages.push_back({{"role", "user"}, {"content", "And of Italy?"}});
  std::unique_ptr<ServerProcess> gw2 = StartGateway(1);
  ASSERT_NE(gw2, nullptr);
  const json turn2 = Ask(gw2->port(), messages, conversation);
  ASSERT_TRUE(turn2.contains("usage")) << turn2.dump();
  const int64_t prompt2 = turn2["usage"]["prompt_tokens"].get<int64_t>();

  held = ListSessions(*models_[winner].stub);
  ASSERT_EQ(held.size(), 1u);  // the same session, not a second one
  EXPECT_EQ(held[0].session_id(), name);
  EXPECT_TRUE(ListSessions(*models_[1 - winner].stub).empty());
  // No re-prefill: of turn 2's prompt, only what turn 1's session lacked was
  // computed (and it lacked nothing of turn 1: the history matches).
  EXPECT_EQ(held[0].prefilled_tokens() - prefilled1, prompt2 - n1);
  EXPECT_GE(turn2["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>(), n1);
  const std::string metrics = Http(gw2->port(), "GET", "/metrics").body;
  EXPECT_EQ(Counter(metrics, "llm_gateway_conversation_tokens_total{kind=\"kept\"}"), n1)
      << metrics;
  EXPECT_EQ(Counter(metrics, "llm_gateway_conversation_tokens_total{kind=\"computed\"}"),
            prompt2 - n1);

  // A single gateway, both turns, another conversation: the same answers.
  const json alone1 = Ask(gw2->port(), json::array({messages[0]}), "stateless-ref");
  EXPECT_EQ(Answer(alone1), Answer(turn1));
  const json alone2 = Ask(gw2->port(), messages, "stateless-ref");
  EXPECT_EQ(Answer(alone2), Answer(turn2));
}

// A conversation busy in one gateway is busy in every gateway: the model
// server's ABORTED for its named session, answered 409 by the other.
TEST_F(StatelessGatewayTest, AConversationRunningThroughOneGatewayIs409InAnother) {
  std::unique_ptr<ServerProcess> gw1 = StartGateway(0), gw2 = StartGateway(1);
  ASSERT_NE(gw1, nullptr);
  ASSERT_NE(gw2, nullptr);
  const json body = {
      {"model", "SmolLM2-135M-Instruct"},
      {"messages", json::array({{{"role", "user"}, {"content", "Tell me a long story."}}})},
      {"stream", true},
      {"max_tokens", 2000},
      {"ignore_eos", true}};
  const std::string header = "X-Session-Id: busy-1\r\n";
  const int fd = testing::Connect(gw1->port());
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(testing::SendAll(
      fd, testing::RequestText("POST", "/v1/chat/completions", body.dump(), header)));
  std::string got;
  char buf[4096];
  while (got.find("data: ") == std::string::npos) {  // the stream is generating
    pollfd p{fd, POLLIN, 0};
    ASSERT_GT(poll(&p, 1, 60000), 0) << got;
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    ASSERT_GT(n, 0) << got;
    got.append(buf, static_cast<size_t>(n));
  }
  json again = body;
  again["stream"] = false;
  const HttpResponse second =
      Http(gw2->port(), "POST", "/v1/chat/completions", again.dump(), header);
  EXPECT_EQ(second.status, 409) << second.body;
  EXPECT_EQ(second.Json()["error"]["code"], "session_busy") << second.body;
  EXPECT_EQ(second.Json()["error"]["param"], "x-session-id") << second.body;
  close(fd);
}

TEST_F(StatelessGatewayTest, PoolsInOppositeOrdersPlaceEveryNameAlike) {
  const client::ChannelFactory factory = [](const std::string& address, const std::string&) {
    return grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  };
  absl::StatusOr<std::unique_ptr<client::ModelPool>> pools[2] = {
      client::ModelPool::Create(Addresses(0), factory, {}),
      client::ModelPool::Create(Addresses(1), factory, {})};
  std::set<std::string> used;
  for (int i = 0; i < 16; ++i) {
    const std::string name = StrCat("conv-name-", i);
    std::string replica[2];
    for (int p = 0; p < 2; ++p) {
      ASSERT_TRUE(pools[p].ok()) << pools[p].status();
      absl::StatusOr<client::ModelPool::Endpoint*> e = (*pools[p])->ForNamedSession(name);
      ASSERT_TRUE(e.ok()) << e.status();
      replica[p] = (*e)->info.replica_id();
    }
    EXPECT_EQ(replica[0], replica[1]) << name;
    EXPECT_THAT(replica[0], StartsWith(StrCat(kPods[Winner(name)], ".")));
    used.insert(replica[0]);
  }
  EXPECT_EQ(used.size(), 2u);
}

// Prefix-aware placement of new sessions: one whose prompt shares a whole
// 64-token block with one placed before goes to the same replica (its
// prefix cache serves the block), counted, unless that replica is busier
// than the other by more than the margin; an unrelated prompt goes round
// robin.
TEST_F(StatelessGatewayTest, NewSessionsSharingAPrefixGoWhereItIs) {
  client::ClientOptions o;
  o.model_address = Addresses(0);
  o.rpc_timeout = absl::Seconds(120);
  absl::StatusOr<std::unique_ptr<client::ModelClient>> model =
      client::ModelClient::Create(o, grpc::InsecureChannelCredentials());
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_TRUE((*model)->Connect().ok());
  std::vector<int32_t> system(130);
  for (size_t i = 0; i < system.size(); ++i) system[i] = static_cast<int32_t>(100 + i);
  const std::atomic<bool> never{false};
  // A new session on `prompt`: its replica id.
  const auto place = [&](std::vector<int32_t> prompt, int64_t* cached) {
    client::Session s;
    int32_t rebuilds = 0;
    absl::StatusOr<client::PrefillResult> r =
        (*model)->Prefill(s, prompt, client::StepOptions(), never, &rebuilds);
    EXPECT_TRUE(r.ok()) << r.status();
    if (cached != nullptr && r.ok()) *cached = r->cached_tokens;
    const std::string replica = client::ModelPool::ReplicaOf(s.id);
    (*model)->Release(s).IgnoreError();  // its blocks stay in the prefix cache
    return replica;
  };
  const std::string first = place(system, nullptr);
  ASSERT_FALSE(first.empty());
  std::vector<int32_t> more = system;
  more.push_back(7);
  int64_t cached = 0;
  EXPECT_EQ(place(more, &cached), first);  // round robin would take the other
  EXPECT_GE(cached, 64);
  EXPECT_EQ((*model)->pool().prefix_routed(), 1);
  // Unrelated: round robin, not counted.
  place(std::vector<int32_t>(80, 5), nullptr);
  EXPECT_EQ((*model)->pool().prefix_routed(), 1);
  // The holder busier than the other by more than the margin (2): elsewhere.
  for (client::ModelPool::Endpoint* e : (*model)->pool().UpEndpoints()) {
    if (e->info.replica_id() == first) e->in_flight += 3;
  }
  more.push_back(8);
  EXPECT_NE(place(more, nullptr), first);
  EXPECT_EQ((*model)->pool().prefix_routed(), 1);
  for (client::ModelPool::Endpoint* e : (*model)->pool().UpEndpoints()) {
    if (e->info.replica_id() == first) e->in_flight -= 3;
  }
}

grpc::Status Prefill(v1::Model::Stub& stub, const v1::PrefillRequest& request,
                     v1::PrefillResponse* response) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  return stub.Prefill(&context, request, response);
}

TEST_F(StatelessGatewayTest, ModelServiceSyncsHistoryUnderAName) {
  v1::Model::Stub& stub = *models_[0].stub;
  v1::PrefillRequest request;
  request.set_session_id("named-1");
  request.set_sync_history(true);
  for (int32_t t : {10, 20, 30, 40, 50}) request.add_tokens(t);
  v1::PrefillResponse first;
  ASSERT_TRUE(Prefill(stub, request, &first).ok());
  EXPECT_EQ(first.session_id(), "named-1");
  EXPECT_EQ(first.kept_tokens(), 0);
  for (int32_t t : {60, 70}) request.add_tokens(t);
  v1::PrefillResponse second;
  ASSERT_TRUE(Prefill(stub, request, &second).ok());
  EXPECT_EQ(second.kept_tokens(), 5);
  EXPECT_EQ(second.num_tokens(), 7);

  for (const std::string& bad :
       std::vector<std::string>{"", "a/b", ".hidden", std::string(201, 'x')}) {
    v1::PrefillRequest r = request;
    r.set_session_id(bad);
    v1::PrefillResponse ignored;
    EXPECT_EQ(Prefill(stub, r, &ignored).error_code(), grpc::StatusCode::INVALID_ARGUMENT) << bad;
  }
  v1::PrefillRequest truncating = request;
  truncating.set_truncate_to(2);
  v1::PrefillResponse ignored;
  EXPECT_EQ(Prefill(stub, truncating, &ignored).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  ASSERT_EQ(ListSessions(stub).size(), 1u);
  EXPECT_EQ(ListSessions(stub)[0].num_tokens(), 7);
}

}  // namespace
}  // namespace llm
