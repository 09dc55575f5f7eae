// Integration test of session snapshots (model.proto's ExportSession and
// ImportSession) between real model_server processes on loopback: A and B
// serve one random-weight model file, C another (same shapes, other
// weights). A session prefilled on A, exported and imported into B decodes
// to the same float32 logits, bit for bit; B's export of it is the same
// bytes as A's, and a lookahead guess stays out of it; C refuses it
// (FAILED_PRECONDITION); damaged snapshots are
// DATA_LOSS or INVALID_ARGUMENT. A server with --session_dir saves its
// sessions on drain and serves them again, under their ids, after a restart;
// a killed one saves nothing.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "client/transport/model_client.h"
#include "client/transport/model_pool.h"
#include "common/strings.h"
#include "llm/v1/model.grpc.pb.h"
#include "model_svc/testing/random_model.h"
#include "tests/ops_server.h"
#include "tests/server_process.h"

namespace llm {
namespace {

using ::testing::HasSubstr;
using ServerState = testing::ServerState<v1::Model>;

model::testing::RandomModelSpec Spec(uint64_t seed) {
  model::testing::RandomModelSpec spec;      // llama, vocab 512, d_model 128, 2 layers
  spec.name = "random-llama-snapshot-test";  // one name: only the weights differ
  spec.seed = seed;
  return spec;
}

// Writes the model of `seed` to a temporary file; "" on failure.
std::string WriteModel(uint64_t seed) {
  const std::string path =
      StrCat(::testing::TempDir(), "session_snapshot_test_", getpid(), "_", seed, ".gguf");
  absl::StatusOr<std::string> bytes = model::testing::RandomModelGguf(Spec(seed));
  if (!bytes.ok()) return "";
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes->data(), static_cast<std::streamsize>(bytes->size()));
  return out ? path : "";
}

std::chrono::system_clock::time_point Deadline() {
  return std::chrono::system_clock::now() + std::chrono::seconds(60);
}

struct Exported {
  grpc::Status status;
  std::string bytes;
  int chunks = 0;
};

Exported Export(v1::Model::Stub& stub, const std::string& session_id) {
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  v1::ExportSessionRequest request;
  request.set_session_id(session_id);
  Exported out;
  auto reader = stub.ExportSession(&context, request);
  v1::SessionChunk chunk;
  while (reader->Read(&chunk)) {
    out.bytes += chunk.data();
    ++out.chunks;
  }
  out.status = reader->Finish();
  return out;
}

// Sends `bytes` in chunks of `chunk` bytes (the first with `id`, if any).
grpc::Status Import(v1::Model::Stub& stub, const std::string& bytes,
                    v1::ImportSessionResponse* response, size_t chunk = 1000,
                    const std::string& id = "") {
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  auto writer = stub.ImportSession(&context, response);
  for (size_t at = 0; at < bytes.size(); at += chunk) {
    v1::SessionChunk c;
    c.set_data(bytes.substr(at, chunk));
    if (at == 0) c.set_session_id(id);
    if (!writer->Write(c)) break;
  }
  writer->WritesDone();
  return writer->Finish();
}

// Float32 logits of one decoded token.
std::string DecodeLogits(v1::Model::Stub& stub, const std::string& session_id, int32_t token) {
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  v1::DecodeTokenRequest request;
  request.set_session_id(session_id);
  request.set_token(token);
  v1::DecodeTokenResponse response;
  const grpc::Status status = stub.Decode(&context, request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return response.logits().float32();
}

v1::PrefillResponse Prefill(v1::Model::Stub& stub, const std::vector<int32_t>& tokens,
                            bool lookahead = false) {
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  v1::PrefillRequest request;
  request.set_lookahead(lookahead);
  for (int32_t t : tokens) request.add_tokens(t);
  v1::PrefillResponse response;
  const grpc::Status status = stub.Prefill(&context, request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return response;
}

// 41 tokens: two full 16-position blocks and a partial third.
std::vector<int32_t> Prompt() {
  std::vector<int32_t> tokens;
  for (int i = 0; i < 41; ++i) tokens.push_back((i * 37 + 11) % 512);
  return tokens;
}

class SessionSnapshotTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    paths_ = new std::vector<std::string>{WriteModel(7), WriteModel(8)};
    servers_ = new std::vector<ServerState>(3);
    const std::string* model[3] = {&(*paths_)[0], &(*paths_)[0], &(*paths_)[1]};
    for (int i = 0; i < 3; ++i) {
      if (model[i]->empty()) {
        (*servers_)[i].error = "cannot write the random model";
        continue;
      }
      testing::StartServer(&(*servers_)[i], "model_server",
                           {"--model", *model[i], "--threads", "1", "--kv_cache_mb", "8"},
                           std::chrono::seconds(60));
    }
  }
  static void TearDownTestSuite() {
    for (ServerState& s : *servers_) testing::StopServerAndExpectCleanExit(&s);
    for (const std::string& p : *paths_) {
      std::error_code ignored;
      std::filesystem::remove(p, ignored);
    }
    delete servers_;
    delete paths_;
  }
  void SetUp() override {
    for (const ServerState& s : *servers_) ASSERT_NE(s.stub, nullptr) << s.error;
  }
  v1::Model::Stub& a() { return *(*servers_)[0].stub; }
  v1::Model::Stub& b() { return *(*servers_)[1].stub; }
  v1::Model::Stub& c() { return *(*servers_)[2].stub; }

  static inline std::vector<std::string>* paths_ = nullptr;
  static inline std::vector<ServerState>* servers_ = nullptr;
};

TEST_F(SessionSnapshotTest, ImportedSessionDecodesBitForBitAndExportsTheSameBytes) {
  const v1::PrefillResponse prefilled = Prefill(a(), Prompt());
  const Exported exported = Export(a(), prefilled.session_id());
  ASSERT_TRUE(exported.status.ok()) << exported.status.error_message();
  ASSERT_GT(exported.bytes.size(), 80u);

  v1::ImportSessionResponse imported;
  const grpc::Status st = Import(b(), exported.bytes, &imported);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(imported.num_tokens(), 41);
  EXPECT_FALSE(imported.session_id().empty());

  const Exported again = Export(b(), imported.session_id());
  ASSERT_TRUE(again.status.ok()) << again.status.error_message();
  EXPECT_TRUE(again.bytes == exported.bytes) << "B's export differs from A's";

  const std::string on_a = DecodeLogits(a(), prefilled.session_id(), 5);
  const std::string on_b = DecodeLogits(b(), imported.session_id(), 5);
  ASSERT_EQ(on_a.size(), 512u * 4);
  ASSERT_EQ(on_b.size(), on_a.size());
  EXPECT_EQ(std::memcmp(on_a.data(), on_b.data(), on_a.size()), 0);

  // The imported blocks are the session's own: a new session with the same
  // prompt on B computes it rather than share KV that B did not compute.
  const v1::PrefillResponse fresh = Prefill(b(), Prompt());
  EXPECT_EQ(fresh.cached_tokens(), 0);
  // While A's own prefix cache serves the same prompt.
  EXPECT_EQ(Prefill(a(), Prompt()).cached_tokens(), 32);
}

TEST_F(SessionSnapshotTest, ExportLeavesTheLookaheadGuessOut) {
  // A's engine appends its guess of the next token at once; the snapshot
  // holds the caller's 41 tokens only, and both sides then decode another.
  const v1::PrefillResponse prefilled = Prefill(a(), Prompt(), /*lookahead=*/true);
  const Exported exported = Export(a(), prefilled.session_id());
  ASSERT_TRUE(exported.status.ok()) << exported.status.error_message();
  v1::ImportSessionResponse imported;
  const grpc::Status st = Import(b(), exported.bytes, &imported);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(imported.num_tokens(), 41);
  const std::string on_a = DecodeLogits(a(), prefilled.session_id(), 9);
  const std::string on_b = DecodeLogits(b(), imported.session_id(), 9);
  ASSERT_EQ(on_a.size(), 512u * 4);
  ASSERT_EQ(on_b.size(), on_a.size());
  EXPECT_EQ(std::memcmp(on_a.data(), on_b.data(), on_a.size()), 0);
}

// Live migration's import (SessionChunk.session_id) and locate
// (ListSessionsRequest.session_id).
TEST_F(SessionSnapshotTest, ImportUnderAnIdIsFoundByItAndRefusesATakenOrBadId) {
  const Exported exported = Export(a(), Prefill(a(), Prompt()).session_id());
  ASSERT_TRUE(exported.status.ok()) << exported.status.error_message();
  const std::string id = "pod-moved.1a2b.00000000000000aa";
  v1::ImportSessionResponse imported;
  grpc::Status st = Import(b(), exported.bytes, &imported, 1000, id);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(imported.session_id(), id);
  EXPECT_EQ(imported.num_tokens(), 41);

  grpc::ClientContext context;
  context.set_deadline(Deadline());
  v1::ListSessionsRequest locate;
  locate.set_session_id(id);
  v1::ListSessionsResponse listed;
  ASSERT_TRUE(b().ListSessions(&context, locate, &listed).ok());
  ASSERT_EQ(listed.sessions_size(), 1);
  EXPECT_EQ(listed.sessions(0).session_id(), id);
  EXPECT_EQ(listed.sessions(0).num_tokens(), 41);
  grpc::ClientContext elsewhere;
  elsewhere.set_deadline(Deadline());
  ASSERT_TRUE(a().ListSessions(&elsewhere, locate, &listed).ok());
  EXPECT_EQ(listed.sessions_size(), 0);

  st = Import(b(), exported.bytes, &imported, 1000, id);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::ALREADY_EXISTS) << st.error_message();
  st = Import(b(), exported.bytes, &imported, 1000, "../etc/passwd");
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
  EXPECT_THAT(st.error_message(), HasSubstr("SessionChunk.session_id"));
  st = Import(b(), exported.bytes, &imported, 1000, std::string(300, 'x'));
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
  EXPECT_THAT(st.error_message(), HasSubstr("300 bytes"));
}

TEST_F(SessionSnapshotTest, AnotherModelRefusesTheSnapshot) {
  const Exported exported = Export(a(), Prefill(a(), Prompt()).session_id());
  ASSERT_TRUE(exported.status.ok()) << exported.status.error_message();
  v1::ImportSessionResponse imported;
  const grpc::Status st = Import(c(), exported.bytes, &imported);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << st.error_message();
  EXPECT_THAT(st.error_message(), HasSubstr("another model"));
}

TEST_F(SessionSnapshotTest, DamagedSnapshotsAndUnknownSessionsAreRefused) {
  const Exported exported = Export(a(), Prefill(a(), Prompt()).session_id());
  ASSERT_TRUE(exported.status.ok()) << exported.status.error_message();
  v1::ImportSessionResponse imported;

  std::string flipped = exported.bytes;
  flipped[flipped.size() / 2] ^= 1;
  grpc::Status st = Import(b(), flipped, &imported);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::DATA_LOSS) << st.error_message();
  EXPECT_THAT(st.error_message(), HasSubstr("checksum"));

  st = Import(b(), exported.bytes.substr(0, exported.bytes.size() - 1), &imported);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::DATA_LOSS) << st.error_message();
  EXPECT_THAT(st.error_message(), HasSubstr("truncated"));

  st = Import(b(), "", &imported);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::DATA_LOSS) << st.error_message();

  st = Import(b(), std::string(64 << 20, 'x'), &imported, 1 << 20);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
  EXPECT_THAT(st.error_message(), HasSubstr("larger than any session"));

  const Exported unknown = Export(a(), "no-such-session");
  EXPECT_EQ(unknown.status.error_code(), grpc::StatusCode::NOT_FOUND)
      << unknown.status.error_message();
  EXPECT_TRUE(unknown.bytes.empty());
}

// model_server --session_dir across a restart.

// Starts model_server on `model` with --session_dir `dir` and its metrics;
// null on failure (the test fails).
std::unique_ptr<testing::OpsServer> StartWithDir(const std::string& model, const std::string& dir,
                                                 const std::vector<std::string>& more = {}) {
  std::vector<std::string> flags = {"--model",          model,        "--threads",     "1",
                                    "--kv_cache_mb",    "8",          "--session_dir", dir,
                                    "--metrics_listen", "127.0.0.1:0"};
  flags.insert(flags.end(), more.begin(), more.end());
  std::string error;
  auto server = testing::OpsServer::Start("model_server", flags, /*want_metrics=*/true, &error);
  EXPECT_NE(server, nullptr) << error;
  return server;
}

std::unique_ptr<v1::Model::Stub> StubOf(const testing::OpsServer& server) {
  auto channel = grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials());
  std::string why;
  EXPECT_TRUE(testing::WaitUntilServing(channel, std::chrono::seconds(60), &why)) << why;
  return v1::Model::NewStub(channel);
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

TEST_F(SessionSnapshotTest, SessionDirKeepsSessionsAcrossADrainedRestartUnderTheirIds) {
  const std::string dir = StrCat(::testing::TempDir(), "session_dir_test_", getpid());
  std::filesystem::remove_all(dir);
  auto first = StartWithDir((*paths_)[0], dir);
  ASSERT_NE(first, nullptr);
  auto stub = StubOf(*first);
  const std::string id = Prefill(*stub, Prompt()).session_id();
  ASSERT_FALSE(id.empty());
  const std::optional<int> drained = first->Terminate();
  ASSERT_TRUE(drained.has_value() && testing::ExitedZero(*drained));
  ASSERT_TRUE(std::filesystem::exists(StrCat(dir, "/", id, ".kvsnap")));

  // Beside it: a snapshot of another model (C's) and a damaged file, which
  // the restart skips and leaves in place; a name that is no session id.
  const Exported other = Export(c(), Prefill(c(), Prompt()).session_id());
  ASSERT_TRUE(other.status.ok()) << other.status.error_message();
  WriteFile(StrCat(dir, "/other-model.1.abc.kvsnap"), other.bytes);
  WriteFile(StrCat(dir, "/damaged.kvsnap"), "LLMKVSNP and then nothing of use");
  WriteFile(StrCat(dir, "/not an id.kvsnap"), other.bytes);
  WriteFile(StrCat(dir, "/.cut-short.kvsnap.tmp"), "LLMKVSNP");  // a save killed midway

  // No checkpoint: the kill below must find nothing written since.
  auto second = StartWithDir((*paths_)[0], dir, {"--session_checkpoint_seconds", "0"});
  ASSERT_NE(second, nullptr);
  stub = StubOf(*second);
  // The same id decodes what an undisturbed server (A) decodes, bit for bit.
  const std::string undisturbed = DecodeLogits(a(), Prefill(a(), Prompt()).session_id(), 5);
  const std::string restored = DecodeLogits(*stub, id, 5);
  ASSERT_EQ(restored.size(), 512u * 4);
  ASSERT_EQ(undisturbed.size(), restored.size());
  EXPECT_EQ(std::memcmp(undisturbed.data(), restored.data(), restored.size()), 0);
  EXPECT_FALSE(std::filesystem::exists(StrCat(dir, "/", id, ".kvsnap")));  // imported: removed
  EXPECT_TRUE(std::filesystem::exists(StrCat(dir, "/other-model.1.abc.kvsnap")));
  EXPECT_TRUE(std::filesystem::exists(StrCat(dir, "/damaged.kvsnap")));
  EXPECT_FALSE(std::filesystem::exists(StrCat(dir, "/.cut-short.kvsnap.tmp")));
  const std::string scrape = testing::HttpGet(second->metrics_port(), "/metrics");
  EXPECT_EQ(testing::Sample(scrape, "llm_session_dir_sessions_total{outcome=\"restored\"}"), 1);
  EXPECT_EQ(testing::Sample(scrape, "llm_session_dir_sessions_total{outcome=\"skipped\"}"), 3);

  // Killed rather than drained: nothing is saved, and the session restored
  // before is not brought back in its older state.
  second->Signal(SIGKILL);
  second->WaitExit(std::chrono::seconds(15));
  auto third = StartWithDir((*paths_)[0], dir);
  ASSERT_NE(third, nullptr);
  stub = StubOf(*third);
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  v1::DecodeTokenRequest request;
  request.set_session_id(id);
  request.set_token(5);
  v1::DecodeTokenResponse response;
  EXPECT_EQ(stub->Decode(&context, request, &response).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(third->Terminate().has_value());
  std::filesystem::remove_all(dir);
}

// --session_checkpoint_seconds: a session written while idle survives a
// kill -9 of its server, as of that checkpoint.
TEST_F(SessionSnapshotTest, ACheckpointedSessionSurvivesAKill) {
  const std::string dir = StrCat(::testing::TempDir(), "session_checkpoint_test_", getpid());
  std::filesystem::remove_all(dir);
  const std::vector<std::string> flags = {"--pod_name", "pod-k", "--session_checkpoint_seconds",
                                          "0.2"};
  auto first = StartWithDir((*paths_)[0], dir, flags);
  ASSERT_NE(first, nullptr);
  const std::string id = Prefill(*StubOf(*first), Prompt()).session_id();
  ASSERT_FALSE(id.empty());
  // Polled (not a fixed sleep): the checkpoint, as its metric says.
  const std::string file = StrCat(dir, "/", id, ".kvsnap");
  for (int i = 0; i < 1200 && testing::Sample(testing::HttpGet(first->metrics_port(), "/metrics"),
                                              "llm_session_dir_sessions_total{outcome="
                                              "\"checkpointed\"}") < 1;
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(std::filesystem::exists(file));
  first->Signal(SIGKILL);
  first->WaitExit(std::chrono::seconds(15));

  auto second = StartWithDir((*paths_)[0], dir, flags);
  ASSERT_NE(second, nullptr);
  const std::string undisturbed = DecodeLogits(a(), Prefill(a(), Prompt()).session_id(), 5);
  const std::string restored = DecodeLogits(*StubOf(*second), id, 5);
  ASSERT_EQ(restored.size(), 512u * 4);
  ASSERT_EQ(undisturbed.size(), restored.size());
  EXPECT_EQ(std::memcmp(undisturbed.data(), restored.data(), restored.size()), 0);
  EXPECT_TRUE(second->Terminate().has_value());
  std::filesystem::remove_all(dir);
}

// --kv_spill_dir on a real server: a session pushed out by 50 others (the
// session limit) comes back on its next decode with an undisturbed
// server's logits, bit for bit, and the metrics say restored, not rebuilt.
TEST_F(SessionSnapshotTest, ASpilledSessionComesBackAndTheMetricsSaySo) {
  const std::string dir = StrCat(::testing::TempDir(), "kv_spill_test_", getpid());
  std::filesystem::remove_all(dir);
  std::vector<std::string> flags = {
      "--model",        (*paths_)[0], "--threads",      "1", "--kv_cache_mb",    "8",
      "--max_sessions", "2",          "--kv_spill_dir", dir, "--metrics_listen", "127.0.0.1:0"};
  std::string error;
  auto server = testing::OpsServer::Start("model_server", flags, /*want_metrics=*/true, &error);
  ASSERT_NE(server, nullptr) << error;
  auto stub = StubOf(*server);
  const std::string id = Prefill(*stub, Prompt()).session_id();
  for (int i = 0; i < 50; ++i) Prefill(*stub, {static_cast<int32_t>(i + 1)});
  const std::string undisturbed = DecodeLogits(a(), Prefill(a(), Prompt()).session_id(), 5);
  const std::string restored = DecodeLogits(*stub, id, 5);
  ASSERT_EQ(undisturbed.size(), restored.size());
  EXPECT_EQ(std::memcmp(undisturbed.data(), restored.data(), restored.size()), 0);
  grpc::ClientContext context;
  v1::ListSessionsRequest request;
  request.set_session_id(id);
  v1::ListSessionsResponse sessions;
  ASSERT_TRUE(stub->ListSessions(&context, request, &sessions).ok());
  bool found = false;
  for (const v1::SessionInfo& s : sessions.sessions()) {
    if (s.session_id() != id) continue;
    found = true;
    EXPECT_EQ(s.prefilled_tokens(), 0);  // restored, not prefilled again
    EXPECT_EQ(s.num_tokens(), static_cast<int64_t>(Prompt().size()) + 1);
  }
  EXPECT_TRUE(found);
  const std::string scrape = testing::HttpGet(server->metrics_port(), "/metrics");
  EXPECT_EQ(testing::Sample(scrape, "llm_kv_spill_total{outcome=\"restored\"}"), 1);
  EXPECT_EQ(testing::Sample(scrape, "llm_kv_spill_total{outcome=\"failed\"}"), 0);
  EXPECT_TRUE(server->Terminate().has_value());
  std::filesystem::remove_all(dir);
}

// A session that holds another history than its client's (as one restored
// from a checkpoint older than the client's last calls): the client's next
// Prefill sees the length disagree, drops it and rebuilds the whole history,
// which then gives the logits of an undisturbed session.
TEST_F(SessionSnapshotTest, TheClientRebuildsASessionThatHoldsAnotherHistory) {
  client::ClientOptions options;
  options.model_address = (*servers_)[0].process->address();
  auto model = client::ModelClient::Create(options, grpc::InsecureChannelCredentials());
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_TRUE((*model)->Connect().ok());
  const std::vector<int32_t> prompt = Prompt();
  client::StepOptions step;
  step.logits.set_encoding(v1::LogitsOptions::LOGITS_FLOAT32);
  client::Session session;
  std::atomic<bool> cancel{false};
  int32_t rebuilds = 0;
  const std::span<const int32_t> all(prompt);
  ASSERT_TRUE((*model)->Prefill(session, all.first(30), step, cancel, &rebuilds).ok());
  {  // Behind the client's back: the server's session is 10 tokens shorter.
    grpc::ClientContext context;
    v1::TruncateRequest request;
    request.set_session_id(session.id);
    request.set_num_tokens(20);
    v1::TruncateResponse response;
    ASSERT_TRUE(a().Truncate(&context, request, &response).ok());
  }
  absl::StatusOr<client::PrefillResult> rest =
      (*model)->Prefill(session, all.subspan(30), step, cancel, &rebuilds);
  ASSERT_TRUE(rest.ok()) << rest.status();
  EXPECT_EQ(rebuilds, 1);
  EXPECT_EQ(session.tokens, prompt);
  const std::string undisturbed = Prefill(a(), prompt).logits().float32();
  ASSERT_EQ(rest->logits.float32().size(), undisturbed.size());
  EXPECT_EQ(std::memcmp(rest->logits.float32().data(), undisturbed.data(), undisturbed.size()), 0);
}

// The client's pool (client/transport/model_pool.h) sends a session whose
// replica restarted (a new epoch, its sessions restored) to that replica,
// even after a refresh has taught it the new epoch.
TEST_F(SessionSnapshotTest, APoolSendsARestoredSessionToItsRestartedReplica) {
  const std::string dir = StrCat(::testing::TempDir(), "session_dir_pool_test_", getpid());
  std::filesystem::remove_all(dir);
  auto server = StartWithDir((*paths_)[0], dir, {"--pod_name", "pod-r"});
  ASSERT_NE(server, nullptr);
  const std::string address = server->address();
  absl::StatusOr<std::unique_ptr<client::ModelPool>> pool = client::ModelPool::Create(
      address,
      [](const std::string& a, const std::string&) {
        return grpc::CreateChannel(a, grpc::InsecureChannelCredentials());
      },
      client::ModelPoolOptions());
  ASSERT_TRUE(pool.ok()) << pool.status();
  const std::string id = Prefill(*StubOf(*server), Prompt()).session_id();
  ASSERT_TRUE((*pool)->Refresh().ok());
  const std::optional<int> drained = server->Terminate();
  ASSERT_TRUE(drained.has_value() && testing::ExitedZero(*drained));
  server = StartWithDir((*paths_)[0], dir, {"--pod_name", "pod-r", "--listen", address});
  ASSERT_NE(server, nullptr);
  grpc::ClientContext context;
  v1::ModelInfo info;
  ASSERT_TRUE(StubOf(*server)->Info(&context, v1::ModelInfoRequest(), &info).ok());
  ASSERT_NE(info.replica_id(), client::ModelPool::ReplicaOf(id));  // a new epoch
  ASSERT_TRUE((*pool)->Refresh().ok());                            // the pool learns it
  absl::StatusOr<client::ModelPool::Endpoint*> owner = (*pool)->ForSession(id);
  ASSERT_TRUE(owner.ok()) << owner.status();
  EXPECT_EQ(DecodeLogits(*(*pool)->Connect(*owner)->stub, id, 5).size(), 512u * 4);
  EXPECT_TRUE(server->Terminate().has_value());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace llm
