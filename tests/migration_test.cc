// Live migration on drain (model_server --peers, issue 30) with two real
// model servers and a tokenizer_server on loopback, the real default model:
//   - 16 multi-turn chats stream concurrently over both replicas; one is
//     SIGTERMed in the middle of the second turn: its sessions move to the
//     other under their ids, every conversation goes on there (the client
//     relocates them: Generate's session_relocations), none is re-prefilled
//     (session_rebuilds 0 in every turn), none is lost, and every answer is
//     the one an undisturbed greedy run gives;
//   - a peer of another model refuses the sessions (FAILED_PRECONDITION):
//     the draining server counts them failed and drops them, and the client
//     falls back to re-prefilling on the replica it has (session_rebuilds 1,
//     same answer).
//
// Needs models/SmolLM2-135M-Instruct.Q4_1.gguf and, for the second test,
// models/gemma-3-270m-q4_k_m.gguf (scripts/fetch-model.sh).
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "client/generator.h"
#include "common/strings.h"
#include "common/test_paths.h"
#include "llm/v1/model.grpc.pb.h"
#include "llm/v1/tokenizer.grpc.pb.h"
#include "tests/replica_testing.h"
#include "tests/server_process.h"

namespace llm {
namespace {

constexpr int kChats = 16;
constexpr int kTurns = 3;
constexpr int kTokens = 8;

std::string ModelPath() { return testing::SourceDir() + "/models/SmolLM2-135M-Instruct.Q4_1.gguf"; }
std::string OtherModelPath() { return testing::SourceDir() + "/models/gemma-3-270m-q4_k_m.gguf"; }

// A loopback port that was free a moment ago (the servers must know each
// other's addresses before they start).
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

using testing::ReplicaId;

client::GenerateParams Greedy() { return testing::Greedy(kTokens); }

std::string Turn(int chat, int turn) {
  static const char* const kTopics[] = {"the sea",   "lighthouses", "bread", "rivers",
                                        "mountains", "trains",      "bees",  "clocks"};
  return StrCat(turn == 0 ? "Tell me about " : " And then, ", kTopics[chat % 8],
                chat >= 8 ? " at night" : "", turn == 2 ? "?" : ".");
}

class MigrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(ModelPath())) GTEST_SKIP() << "missing " << ModelPath();
    ASSERT_NO_FATAL_FAILURE(testing::StartTokenizer(&tokenizer_, ModelPath()));
  }

  // Starts model server `i` of `model` on `port` with `peers` (may be "").
  void StartModel(int i, const std::string& model, int port, const std::string& peers) {
    std::vector<std::string> flags = {
        "--model",   model, "--listen",   StrCat("127.0.0.1:", port), "--kv_cache_mb",   "96",
        "--threads", "1",   "--pod_name", StrCat("pod-", i),          "--drain_seconds", "60"};
    if (!peers.empty()) {
      flags.push_back("--peers");
      flags.push_back(peers);
    }
    testing::StartServer(&models_[i], "model_server", flags, std::chrono::seconds(120));
    ASSERT_NE(models_[i].stub, nullptr) << models_[i].error;
    replica_[i] = ReplicaId(*models_[i].stub);
  }

  std::unique_ptr<client::Generator> Connect(const std::string& model_address) {
    return testing::ConnectGenerator(tokenizer_.process->address(), model_address);
  }
  std::vector<int32_t> Encode(client::Generator& g, const std::string& text) {
    return testing::EncodeOrFail(g, text);
  }
  // Whether `session_id` was made by server `i`.
  bool MadeBy(int i, const std::string& session_id) const {
    return session_id.rfind(replica_[i] + ".", 0) == 0;
  }

  testing::ServerState<v1::Tokenizer> tokenizer_;
  testing::ServerState<v1::Model> models_[3];
  std::string replica_[3];
};

TEST_F(MigrationTest, SigtermMidStreamMovesEveryChatToThePeerWithoutRePrefill) {
  const int ports[2] = {FreePort(), FreePort()};
  ASSERT_NE(ports[0], ports[1]);
  const std::string both = StrCat("127.0.0.1:", ports[0], ",127.0.0.1:", ports[1]);
  for (int i = 0; i < 2; ++i) ASSERT_NO_FATAL_FAILURE(StartModel(i, ModelPath(), ports[i], both));
  std::unique_ptr<client::Generator> g = Connect(both);
  ASSERT_NE(g, nullptr);

  // The undisturbed greedy run, one chat after another.
  std::vector<std::vector<std::vector<int32_t>>> expected(kChats);
  for (int c = 0; c < kChats; ++c) {
    client::Session s;
    for (int t = 0; t < kTurns; ++t) {
      absl::StatusOr<client::GenerateResult> r =
          g->Generate(s, Encode(*g, Turn(c, t)), Greedy(), nullptr);
      ASSERT_TRUE(r.ok()) << r.status();
      expected[c].push_back(r->tokens);
    }
    ASSERT_TRUE(g->Release(s).ok());
  }

  // The same chats at once; server 0 gets SIGTERM in the middle of turn 2.
  std::atomic<int> tokens_seen{0};
  std::atomic<bool> signalled{false};
  std::optional<int> victim_status;
  std::thread terminator;
  const int trigger = kChats * kTokens + kChats * kTokens / 2;
  std::vector<std::vector<std::vector<int32_t>>> got(kChats);
  std::vector<int> rebuilds(kChats, 0), relocations(kChats, 0);
  std::vector<std::string> first_ids(kChats), last_ids(kChats), errors(kChats);
  std::vector<std::thread> chats;
  for (int c = 0; c < kChats; ++c) {
    chats.emplace_back([&, c] {
      // A Generator runs one generation at a time (its sampler's scratch is
      // its own): one per chat, over the same services (the same pool and
      // routing table), as the gateway makes one per request.
      client::Generator chat(g->shared_services());
      client::Session s;
      for (int t = 0; t < kTurns; ++t) {
        absl::StatusOr<client::GenerateResult> r =
            chat.Generate(s, Encode(chat, Turn(c, t)), Greedy(), [&](const client::TokenEvent& e) {
              if (e.token < 0 || ++tokens_seen != trigger || signalled.exchange(true)) return;
              terminator = std::thread(
                  [&] { victim_status = models_[0].process->Terminate(std::chrono::seconds(90)); });
            });
        if (!r.ok()) {
          errors[c] = r.status().ToString();
          return;
        }
        if (t == 0) first_ids[c] = s.id;
        got[c].push_back(r->tokens);
        rebuilds[c] += r->session_rebuilds;
        relocations[c] += r->session_relocations;
      }
      last_ids[c] = s.id;
    });
  }
  for (std::thread& t : chats) t.join();
  ASSERT_TRUE(signalled.load());
  terminator.join();
  ASSERT_TRUE(victim_status.has_value()) << "server 0 did not exit within 90 s of SIGTERM";
  EXPECT_TRUE(testing::ExitedZero(*victim_status)) << testing::DescribeWaitStatus(*victim_status);

  int moved = 0, moved_relocations = 0;
  for (int c = 0; c < kChats; ++c) {
    SCOPED_TRACE(StrCat("chat ", c, " (session ", first_ids[c], ")"));
    EXPECT_EQ(errors[c], "");  // none lost
    EXPECT_EQ(got[c], expected[c]);
    EXPECT_EQ(rebuilds[c], 0);             // none re-prefilled
    EXPECT_EQ(last_ids[c], first_ids[c]);  // the same id, wherever it lives
    if (MadeBy(0, first_ids[c])) {
      // A chat caught mid-turn relocates (NOT_FOUND + location); one between
      // turns may find its session through the pool instead (server 0 gone:
      // ModelPool::ForSession asks the replicas), which counts no relocation.
      ++moved;
      moved_relocations += relocations[c];
    } else {
      EXPECT_EQ(relocations[c], 0);
    }
  }
  EXPECT_GE(moved, 1);              // round robin put chats on server 0
  EXPECT_GE(moved_relocations, 1);  // the SIGTERM came mid-turn
  // Every chat lives on server 1 now, under its first id.
  grpc::ClientContext context;
  v1::ListSessionsResponse listed;
  ASSERT_TRUE(models_[1].stub->ListSessions(&context, v1::ListSessionsRequest(), &listed).ok());
  int held = 0;
  for (const v1::SessionInfo& info : listed.sessions()) {
    for (int c = 0; c < kChats; ++c) held += info.session_id() == first_ids[c];
  }
  EXPECT_EQ(held, kChats);
}

TEST_F(MigrationTest, APeerOfAnotherModelRefusesAndTheClientRePrefills) {
  if (!std::filesystem::exists(OtherModelPath())) GTEST_SKIP() << "missing " << OtherModelPath();
  const int ports[3] = {FreePort(), FreePort(), FreePort()};
  // Server 0's only peer serves another model; server 2 is the client's other replica.
  ASSERT_NO_FATAL_FAILURE(StartModel(1, OtherModelPath(), ports[1], ""));
  // (The other model's replica first: the peer pool keeps the first model
  // that answers, so server 0 itself is the odd one there and the import
  // really reaches the other model, which refuses it.)
  ASSERT_NO_FATAL_FAILURE(StartModel(0, ModelPath(), ports[0],
                                     StrCat("127.0.0.1:", ports[1], ",127.0.0.1:", ports[0])));
  ASSERT_NO_FATAL_FAILURE(StartModel(2, ModelPath(), ports[2], ""));
  std::unique_ptr<client::Generator> g =
      Connect(StrCat("127.0.0.1:", ports[0], ",127.0.0.1:", ports[2]));
  ASSERT_NE(g, nullptr);
  // A session on server 0 (new sessions alternate).
  client::Session s;
  std::vector<int32_t> first;
  for (int i = 0; i < 2 && !MadeBy(0, s.id); ++i) {
    s = client::Session();
    absl::StatusOr<client::GenerateResult> r =
        g->Generate(s, Encode(*g, Turn(0, 0)), Greedy(), nullptr);
    ASSERT_TRUE(r.ok()) << r.status();
    first = r->tokens;
  }
  ASSERT_TRUE(MadeBy(0, s.id));
  client::Session reference = s;
  reference.id.clear();  // rebuilt wherever: the history's continuation
  absl::StatusOr<client::GenerateResult> expected =
      g->Generate(reference, Encode(*g, Turn(0, 1)), Greedy(), nullptr);
  ASSERT_TRUE(expected.ok()) << expected.status();

  const std::optional<int> status = models_[0].process->Terminate(std::chrono::seconds(90));
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(testing::ExitedZero(*status)) << testing::DescribeWaitStatus(*status);
  absl::StatusOr<client::GenerateResult> r =
      g->Generate(s, Encode(*g, Turn(0, 1)), Greedy(), nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->session_relocations, 0);
  EXPECT_EQ(r->session_rebuilds, 1);  // the fallback: re-prefilled on server 2
  EXPECT_EQ(r->tokens, expected->tokens);
  EXPECT_TRUE(MadeBy(2, s.id));
}

}  // namespace
}  // namespace llm
