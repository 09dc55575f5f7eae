// Integration tests of the model server's limits (each answered with its
// status code and counted in llm_limit_rejected_total{reason}) and of its
// drain on SIGTERM (new sessions refused, existing sessions and open streams
// served, health NOT_SERVING, exit 0 once nothing is in flight): the real
// model_server binary with a random model, over gRPC on loopback.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/strings.h"
#include "llm/v1/model.grpc.pb.h"
#include "model_svc/testing/random_model.h"
#include "tests/ops_server.h"
#include "tests/server_process.h"

namespace llm {
namespace {

using testing::Describe;
using ::testing::HasSubstr;
using testing::HttpGet;
using testing::OpsServer;
using testing::Sample;
using ::testing::StartsWith;

std::chrono::system_clock::time_point Deadline() {
  return std::chrono::system_clock::now() + std::chrono::seconds(60);
}

grpc::Status Prefill(v1::Model::Stub& stub, const std::string& session,
                     const std::vector<int>& tokens, v1::PrefillResponse* response) {
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  v1::PrefillRequest request;
  request.set_session_id(session);
  for (int t : tokens) request.add_tokens(t);
  request.mutable_logits()->set_encoding(v1::LogitsOptions::LOGITS_TOP_N);
  request.mutable_logits()->set_top_n(1);
  return stub.Prefill(&context, request, response);
}

// A decode of `token` on `session` asking for top-1 logits only.
v1::DecodeTokenRequest Top1Request(const std::string& session, int token) {
  v1::DecodeTokenRequest request;
  request.set_session_id(session);
  request.set_token(token);
  request.mutable_logits()->set_encoding(v1::LogitsOptions::LOGITS_TOP_N);
  request.mutable_logits()->set_top_n(1);
  return request;
}

grpc::Status Decode(v1::Model::Stub& stub, const std::string& session, int token) {
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  v1::DecodeTokenResponse response;
  return stub.Decode(&context, Top1Request(session, token), &response);
}

grpc::Status Fork(v1::Model::Stub& stub, const std::string& session) {
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  v1::ForkRequest request;
  request.set_session_id(session);
  v1::ForkResponse response;
  return stub.Fork(&context, request, &response);
}

v1::ModelInfo Info(v1::Model::Stub& stub) {
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  v1::ModelInfo info;
  const grpc::Status status = stub.Info(&context, v1::ModelInfoRequest(), &info);
  EXPECT_TRUE(status.ok()) << Describe(status);
  return info;
}

// One DecodeStream step: writes `token` for `session` and reads the answer.
bool StreamStep(grpc::ClientReaderWriter<v1::DecodeTokenRequest, v1::DecodeTokenResponse>& stream,
                const std::string& session, int token, int64_t* num_tokens) {
  v1::DecodeTokenResponse response;
  if (!stream.Write(Top1Request(session, token)) || !stream.Read(&response)) return false;
  *num_tokens = response.num_tokens();
  return true;
}

class ModelServerFixture : public ::testing::Test {
 protected:
  // Starts model_server with `extra` flags on `spec`'s model (default: the
  // random model of seed 5); its stderr (the request log) goes to log_path_.
  void Start(const std::vector<std::string>& extra,
             std::optional<model::testing::RandomModelSpec> spec = std::nullopt) {
    if (spec.has_value()) {
      model_ = StrCat(::testing::TempDir(), "limits_drain_test_model_", getpid(), ".gguf");
      absl::StatusOr<std::string> bytes = model::testing::RandomModelGguf(*spec);
      ASSERT_TRUE(bytes.ok()) << bytes.status();
      std::ofstream(model_, std::ios::binary) << *bytes;
    } else {
      model_ = testing::WriteRandomModel("limits_drain_test", 5);
    }
    ASSERT_FALSE(model_.empty());
    std::vector<std::string> flags = {"--model",          model_,       "--kv_cache_mb", "8",
                                      "--metrics_listen", "127.0.0.1:0"};
    flags.insert(flags.end(), extra.begin(), extra.end());
    std::string error;
    log_path_ = StrCat(::testing::TempDir(), "limits_drain_test_log_", getpid());
    server_ = OpsServer::Start("model_server", flags, true, &error, log_path_);
    ASSERT_NE(server_, nullptr) << error;
    channel_ = grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials());
    ASSERT_TRUE(testing::WaitUntilServing(channel_, std::chrono::seconds(60), &error)) << error;
    stub_ = v1::Model::NewStub(channel_);
  }
  void TearDown() override {
    stub_.reset();
    channel_.reset();
    server_.reset();
    if (!model_.empty()) std::filesystem::remove(model_);
    if (!log_path_.empty()) std::filesystem::remove(log_path_);
  }
  // The sessions the server holds, by id: their token counts.
  std::map<std::string, int64_t> Sessions() const {
    grpc::ClientContext context;
    context.set_deadline(Deadline());
    v1::ListSessionsResponse response;
    EXPECT_TRUE(stub_->ListSessions(&context, {}, &response).ok());
    std::map<std::string, int64_t> out;
    for (const v1::SessionInfo& s : response.sessions()) out[s.session_id()] = s.num_tokens();
    return out;
  }
  std::string Scrape() const { return HttpGet(server_->metrics_port(), "/metrics"); }
  std::optional<double> Limited(const std::string& reason) const {
    return Sample(Scrape(), StrCat("llm_limit_rejected_total{reason=\"", reason, "\"}"));
  }

  std::string model_;
  std::string log_path_;
  std::unique_ptr<OpsServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Model::Stub> stub_;
};

// ---------------------------------------------------------------------------
// Limits.

class LimitsTest : public ModelServerFixture {
 protected:
  void SetUp() override {
    Start({"--max_sessions", "1", "--max_streams", "1", "--max_message_bytes", "4096",
           "--max_context", "32"});
  }
};

TEST_F(LimitsTest, InfoReportsTheStreamLimitAndTheReplica) {
  const v1::ModelInfo info = Info(*stub_);
  EXPECT_EQ(info.max_streams(), 1);
  EXPECT_EQ(info.max_sessions(), 1);
  EXPECT_FALSE(info.replica_id().empty());
  v1::PrefillResponse p;
  ASSERT_TRUE(Prefill(*stub_, "", {1, 2, 3}, &p).ok());
  EXPECT_THAT(p.session_id(), StartsWith(info.replica_id() + "."));
  EXPECT_EQ(p.session_id().size(), info.replica_id().size() + 1 + 16);
}

// At the session limit an idle session gives way to a new one (counted as
// an eviction); a Fork keeps its parent, so with one session it has no room.
TEST_F(LimitsTest, SessionLimitEvictsIdleSessionsAndAForkBeyondItIsResourceExhausted) {
  v1::PrefillResponse p;
  ASSERT_TRUE(Prefill(*stub_, "", {1, 2, 3}, &p).ok());
  EXPECT_EQ(Limited("max_sessions"), std::nullopt);  // the family is empty so far
  v1::PrefillResponse second;
  grpc::Status status = Prefill(*stub_, "", {1, 2, 3}, &second);
  ASSERT_TRUE(status.ok()) << Describe(status);
  EXPECT_EQ(Sessions(), (std::map<std::string, int64_t>{{second.session_id(), 3}}));
  EXPECT_EQ(Sample(Scrape(), "llm_sessions_evicted_total{reason=\"max_sessions\"}"), 1.0);
  EXPECT_EQ(Decode(*stub_, p.session_id(), 4).error_code(), grpc::StatusCode::NOT_FOUND);
  status = Fork(*stub_, second.session_id());
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << Describe(status);
  EXPECT_THAT(status.error_message(), HasSubstr("session limit"));
  EXPECT_EQ(Limited("max_sessions"), 1.0);
  EXPECT_EQ(Sample(Scrape(), "llm_requests_rejected_total{code=\"RESOURCE_EXHAUSTED\"}"), 1.0);
}

TEST_F(LimitsTest, PromptPastTheContextIsOutOfRangeAndCounted) {
  v1::PrefillResponse p;
  ASSERT_TRUE(Prefill(*stub_, "", std::vector<int>(30, 7), &p).ok());
  grpc::Status status = Prefill(*stub_, p.session_id(), std::vector<int>(3, 7), &p);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::OUT_OF_RANGE) << Describe(status);
  EXPECT_EQ(Limited("prompt_tokens"), 1.0);
  // Decoding up to the context is fine; one more token is the context limit.
  ASSERT_TRUE(Decode(*stub_, p.session_id(), 7).ok());
  ASSERT_TRUE(Decode(*stub_, p.session_id(), 7).ok());
  status = Decode(*stub_, p.session_id(), 7);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::OUT_OF_RANGE) << Describe(status);
  EXPECT_EQ(Limited("context_length"), 1.0);
  EXPECT_EQ(Limited("prompt_tokens"), 1.0);
}

TEST_F(LimitsTest, MessageOverTheLimitIsResourceExhaustedAndCounted) {
  v1::PrefillResponse p;
  ASSERT_TRUE(Prefill(*stub_, "", {1}, &p).ok());
  // 3000 two-byte varints: about 6000 bytes, over 4096 (and under gRPC's own
  // limit of twice that, so the service sees and counts it).
  const grpc::Status status = Prefill(*stub_, p.session_id(), std::vector<int>(3000, 300), &p);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << Describe(status);
  EXPECT_THAT(status.error_message(), HasSubstr("--max_message_bytes"));
  EXPECT_EQ(Limited("message_size"), 1.0);
  // Past twice the limit gRPC refuses it (the same code, uncounted).
  const grpc::Status huge = Prefill(*stub_, p.session_id(), std::vector<int>(6000, 300), &p);
  EXPECT_EQ(huge.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << Describe(huge);
  EXPECT_EQ(Limited("message_size"), 1.0);
}

// A call whose response could not be sent (over --max_message_bytes) is
// refused before any work: it used to leave a new session (Prefill) or its
// token (Decode) behind although the call failed.
class ResponseLimitTest : public ModelServerFixture {
 protected:
  // The random model's 512 logits: 2,048 bytes as float32, 1,024 as float16.
  void SetUp() override { Start({"--max_message_bytes", "1500"}); }
};

grpc::Status PrefillWith(v1::Model::Stub& stub, const std::string& session,
                         v1::LogitsOptions::Encoding encoding, v1::PrefillResponse* response) {
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  v1::PrefillRequest request;
  request.set_session_id(session);
  for (int t : {1, 2, 3}) request.add_tokens(t);
  request.mutable_logits()->set_encoding(encoding);
  return stub.Prefill(&context, request, response);
}

TEST_F(ResponseLimitTest, ResponseOverTheLimitIsRefusedBeforeAnyWork) {
  v1::PrefillResponse p;
  grpc::Status status = PrefillWith(*stub_, "", v1::LogitsOptions::LOGITS_FLOAT32, &p);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << Describe(status);
  EXPECT_THAT(status.error_message(), HasSubstr("LOGITS_FLOAT16 or LOGITS_TOP_N"));
  EXPECT_TRUE(Sessions().empty()) << "the refused Prefill left a session";
  EXPECT_EQ(Limited("message_size"), 1.0);

  ASSERT_TRUE(PrefillWith(*stub_, "", v1::LogitsOptions::LOGITS_FLOAT16, &p).ok());
  EXPECT_EQ(Sessions(), (std::map<std::string, int64_t>{{p.session_id(), 3}}));
  // An existing session: neither Prefill nor Decode nor a stream step appends.
  status = PrefillWith(*stub_, p.session_id(), v1::LogitsOptions::LOGITS_FLOAT32, &p);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << Describe(status);
  v1::DecodeTokenRequest decode;
  decode.set_session_id(p.session_id());
  decode.set_token(4);
  decode.mutable_logits()->set_encoding(v1::LogitsOptions::LOGITS_FLOAT32);
  {
    grpc::ClientContext context;
    context.set_deadline(Deadline());
    v1::DecodeTokenResponse response;
    status = stub_->Decode(&context, decode, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << Describe(status);
  }
  {
    grpc::ClientContext context;
    context.set_deadline(Deadline());
    auto stream = stub_->DecodeStream(&context);
    v1::DecodeTokenResponse response;
    ASSERT_TRUE(stream->Write(decode));
    EXPECT_FALSE(stream->Read(&response));
    status = stream->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << Describe(status);
  }
  EXPECT_EQ(Sessions(), (std::map<std::string, int64_t>{{p.session_id(), 3}}));
  EXPECT_EQ(Limited("message_size"), 4.0);
  // What fits is served.
  decode.mutable_logits()->set_encoding(v1::LogitsOptions::LOGITS_FLOAT16);
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  v1::DecodeTokenResponse response;
  ASSERT_TRUE(stub_->Decode(&context, decode, &response).ok());
  EXPECT_EQ(response.num_tokens(), 4);
}

// Scoring a prompt grows the response by each token's score: a call that
// could exceed the limit is refused before any work too.
TEST_F(ResponseLimitTest, ScoredPromptOverTheLimitIsRefusedBeforeAnyWork) {
  v1::PrefillRequest request;
  for (int t = 0; t < 40; ++t) request.add_tokens(t + 1);
  request.mutable_logits()->set_encoding(v1::LogitsOptions::LOGITS_TOP_N);
  request.mutable_logits()->set_top_n(1);
  request.mutable_prompt_logprobs()->set_enabled(true);
  request.mutable_prompt_logprobs()->set_top_n(5);  // 39 x (40 + 45) bytes > 1500
  v1::PrefillResponse response;
  {
    grpc::ClientContext context;
    context.set_deadline(Deadline());
    const grpc::Status status = stub_->Prefill(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << Describe(status);
    EXPECT_THAT(status.error_message(), HasSubstr("score fewer tokens"));
  }
  EXPECT_TRUE(Sessions().empty()) << "the refused Prefill left a session";
  request.mutable_tokens()->Truncate(10);  // 9 x 85 bytes fit
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  ASSERT_TRUE(stub_->Prefill(&context, request, &response).ok());
  EXPECT_EQ(response.prompt_logprobs_size(), 9);
}

// The server with its default limits.
class DefaultLimitsTest : public ModelServerFixture {
 protected:
  void SetUp() override { Start({}); }
};

// Client strings are bounded and never echoed whole: a 9 KB session id used
// to come back in the status (RESOURCE_EXHAUSTED "received initial metadata
// size exceeds limit" at the client instead of the real error) and a 1 MiB
// one wrote a 2 MB log line.
TEST_F(DefaultLimitsTest, LongSessionIdsAreInvalidAndNeverEchoedWhole) {
  for (const size_t bytes : {size_t{257}, size_t{9000}, size_t{1} << 20}) {
    SCOPED_TRACE(bytes);
    const std::string id(bytes, 'x');
    grpc::ClientContext context;
    context.set_deadline(Deadline());
    v1::DecodeTokenResponse response;
    const grpc::Status status = stub_->Decode(&context, Top1Request(id, 1), &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << Describe(status);
    EXPECT_THAT(status.error_message(), HasSubstr(StrCat("session_id has ", bytes, " bytes")));
    EXPECT_LT(status.error_message().size(), 200u);
    v1::PrefillResponse p;
    EXPECT_EQ(Prefill(*stub_, id, {1}, &p).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    grpc::ClientContext release_context;
    v1::ReleaseRequest release;
    release.set_session_id(id);
    v1::ReleaseResponse released;
    EXPECT_EQ(stub_->Release(&release_context, release, &released).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
  }
  // 256 bytes is within the limit: an unknown session.
  v1::PrefillResponse p;
  const grpc::Status status = Prefill(*stub_, std::string(256, 'x'), {1}, &p);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND) << Describe(status);
  // No log line carries more than a clipped id.
  std::ifstream log(log_path_);
  std::string line;
  int lines = 0;
  while (std::getline(log, line)) {
    ++lines;
    EXPECT_LT(line.size(), 1200u) << line.substr(0, 200);
  }
  EXPECT_GT(lines, 0);
}

// An enum value the proto does not define is INVALID_ARGUMENT, never a
// default.
TEST_F(DefaultLimitsTest, UnknownLogitsEncodingIsInvalid) {
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  v1::PrefillRequest request;
  request.add_tokens(1);
  request.mutable_logits()->set_encoding(static_cast<v1::LogitsOptions::Encoding>(7));
  v1::PrefillResponse response;
  const grpc::Status status = stub_->Prefill(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << Describe(status);
  EXPECT_THAT(status.error_message(), HasSubstr("unknown logits encoding 7"));
}

// A model whose logits are NaN (here: a NaN output norm) is not served: the
// call fails with INTERNAL and is counted, instead of sending NaN logits
// that only the client's sampler would notice.
class BrokenModelTest : public ModelServerFixture {
 protected:
  void SetUp() override {
    model::testing::RandomModelSpec spec;
    spec.seed = 6;
    spec.overrides.push_back(
        {"output_norm.weight", gguf::TensorType::kF32, {spec.d_model}, std::nanf("")});
    Start({}, spec);
  }
};

TEST_F(BrokenModelTest, NonFiniteLogitsAreInternalAndCounted) {
  v1::PrefillResponse p;
  grpc::Status status = Prefill(*stub_, "", {1, 2, 3}, &p);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INTERNAL) << Describe(status);
  EXPECT_THAT(status.error_message(), HasSubstr("non-finite logits"));
  EXPECT_EQ(Sample(Scrape(), "llm_non_finite_logits_total"), 1.0);
}

TEST_F(LimitsTest, StreamBeyondTheLimitIsResourceExhaustedAndCounted) {
  v1::PrefillResponse p;
  ASSERT_TRUE(Prefill(*stub_, "", {1, 2}, &p).ok());
  grpc::ClientContext first_context;
  first_context.set_deadline(Deadline());
  auto first = stub_->DecodeStream(&first_context);
  int64_t n = 0;
  ASSERT_TRUE(StreamStep(*first, p.session_id(), 3, &n));  // admitted and open
  EXPECT_EQ(n, 3);

  grpc::ClientContext second_context;
  second_context.set_deadline(Deadline());
  auto second = stub_->DecodeStream(&second_context);
  EXPECT_FALSE(StreamStep(*second, p.session_id(), 4, &n));
  const grpc::Status refused = second->Finish();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << Describe(refused);
  EXPECT_THAT(refused.error_message(), HasSubstr("--max_streams"));
  EXPECT_EQ(Limited("max_streams"), 1.0);

  // The open stream is unaffected; once it ends, a new one is admitted.
  ASSERT_TRUE(StreamStep(*first, p.session_id(), 4, &n));
  EXPECT_EQ(n, 4);
  first->WritesDone();
  ASSERT_TRUE(first->Finish().ok());
  // The server counts the first stream until its reactor is gone, which
  // follows Finish on the client closely but not synchronously: retry.
  bool admitted = false;
  for (int attempt = 0; attempt < 200 && !admitted; ++attempt) {
    grpc::ClientContext context;
    context.set_deadline(Deadline());
    auto third = stub_->DecodeStream(&context);
    admitted = StreamStep(*third, p.session_id(), 5, &n);
    third->WritesDone();
    third->Finish().IgnoreError();
    if (!admitted) std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  EXPECT_TRUE(admitted);
}

// ---------------------------------------------------------------------------
// Drain.

class DrainTest : public ModelServerFixture {};

TEST_F(DrainTest, SigtermServesOpenStreamsAndExistingSessionsRefusesNewOnesThenExitsZero) {
  // A long drain: the server must end it by itself when nothing is in flight.
  Start({"--drain_seconds", "120", "--pod_name", "drain-pod"});
  const v1::ModelInfo info = Info(*stub_);
  EXPECT_THAT(info.replica_id(), StartsWith("drain-pod."));
  v1::PrefillResponse a, b;
  ASSERT_TRUE(Prefill(*stub_, "", {1, 2, 3}, &a).ok());
  ASSERT_TRUE(Prefill(*stub_, "", {4, 5}, &b).ok());
  grpc::ClientContext stream_context;
  stream_context.set_deadline(Deadline());
  auto stream = stub_->DecodeStream(&stream_context);
  int64_t n = 0;
  ASSERT_TRUE(StreamStep(*stream, a.session_id(), 9, &n));
  EXPECT_EQ(n, 4);

  server_->Signal(SIGTERM);
  // Health turns NOT_SERVING.
  const auto give_up = testing::Clock::now() + std::chrono::seconds(30);
  int serving = -1;
  while (testing::Clock::now() < give_up) {
    const testing::HealthResult h = testing::CheckHealth(channel_, "", std::chrono::seconds(5));
    ASSERT_TRUE(h.status.ok()) << Describe(h.status);
    serving = h.serving_status;
    if (serving == testing::kNotServing) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(serving, testing::kNotServing);
  const testing::HealthResult model_health =
      testing::CheckHealth(channel_, "llm.v1.Model", std::chrono::seconds(5));
  EXPECT_EQ(model_health.serving_status, testing::kNotServing);

  // New sessions are refused...
  v1::PrefillResponse refused;
  grpc::Status status = Prefill(*stub_, "", {1, 2}, &refused);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << Describe(status);
  EXPECT_THAT(status.error_message(), HasSubstr("draining"));
  status = Fork(*stub_, b.session_id());
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << Describe(status);
  // ...the open stream goes on...
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(StreamStep(*stream, a.session_id(), 10 + i, &n)) << "step " << i;
    EXPECT_EQ(n, 5 + i);
  }
  // ...and so do calls on existing sessions.
  v1::PrefillResponse appended;
  status = Prefill(*stub_, b.session_id(), {6, 7}, &appended);
  ASSERT_TRUE(status.ok()) << Describe(status);
  EXPECT_EQ(appended.num_tokens(), 4);
  ASSERT_TRUE(Decode(*stub_, b.session_id(), 8).ok());

  // Closing the stream leaves nothing in flight: the server exits 0 long
  // before the 120 s drain would end.
  stream->WritesDone();
  status = stream->Finish();
  EXPECT_TRUE(status.ok()) << Describe(status);
  const std::optional<int> exit_status = server_->WaitExit(std::chrono::seconds(60));
  ASSERT_TRUE(exit_status.has_value()) << "still running 60 s after the last call ended";
  EXPECT_TRUE(testing::ExitedZero(*exit_status)) << testing::DescribeWaitStatus(*exit_status);
}

TEST_F(DrainTest, DrainTimeoutCancelsWhatIsLeftAndExitsZero) {
  Start({"--drain_seconds", "1"});
  v1::PrefillResponse a;
  ASSERT_TRUE(Prefill(*stub_, "", {1, 2, 3}, &a).ok());
  grpc::ClientContext stream_context;
  stream_context.set_deadline(Deadline());
  auto stream = stub_->DecodeStream(&stream_context);
  int64_t n = 0;
  ASSERT_TRUE(StreamStep(*stream, a.session_id(), 9, &n));
  server_->Signal(SIGTERM);
  // The stream stays open (idle) past the drain: the server cancels it.
  const std::optional<int> exit_status = server_->WaitExit(std::chrono::seconds(60));
  ASSERT_TRUE(exit_status.has_value());
  EXPECT_TRUE(testing::ExitedZero(*exit_status)) << testing::DescribeWaitStatus(*exit_status);
  v1::DecodeTokenResponse response;
  while (stream->Read(&response)) {
  }
  EXPECT_FALSE(stream->Finish().ok());
}

// model_server with `flags` must exit 2 (a usage error) without serving.
void ExpectUsageError(const std::vector<std::string>& flags) {
  const std::string model = testing::WriteRandomModel("limits_drain_id_flags", 5);
  ASSERT_FALSE(model.empty());
  std::vector<std::string> argv = {testing::BinPath("model_server"), "--model", model};
  argv.insert(argv.end(), flags.begin(), flags.end());
  std::string error;
  const pid_t pid = testing::Spawn(argv, -1, -1, &error);
  ASSERT_GT(pid, 0) << error;
  const std::optional<int> status = testing::WaitForExit(pid, std::chrono::seconds(30));
  std::filesystem::remove(model);
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 2)
      << testing::DescribeWaitStatus(*status);
}

TEST(PodNameTest, BadPodNameIsAUsageError) { ExpectUsageError({"--pod_name", "a/b"}); }

// The prefix goes into every session id too (proto strings: no invalid UTF-8).
TEST(PodNameTest, BadSessionPrefixIsAUsageError) {
  ExpectUsageError({"--session_prefix", "tenant\xff"});
  ExpectUsageError({"--session_prefix", "a b"});
}

}  // namespace
}  // namespace llm
