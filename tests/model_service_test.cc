// Integration test of the model service: writes a small random-weight Llama
// GGUF, starts the real model_server binary on it as a child process on a free
// loopback port, talks to it over gRPC with the generated stubs, and checks
// that SIGTERM makes it exit with status 0.
//
// Two servers, each started once per suite: "main" (--max_context 64, for the
// RPCs, encodings, streams, batching and OUT_OF_RANGE) and "limits"
// (--max_sessions 2, a 1 MiB KV pool and 8-token steps, for the session
// limit's eviction, RESOURCE_EXHAUSTED and ABORTED). A third suite starts servers of its own
// for the process life cycle.
//
// Logits are compared between computations that should be the same: a
// session forked from another, a stream against unary calls, a batch against
// a session alone. Different batch shapes may round differently, so those
// comparisons allow 1e-4 and require the same argmax.
#include "model_svc/server/model_service.h"

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/grpc/reflection_testing.h"
#include "common/grpc/server_runner.h"
#include "common/half.h"
#include "common/strings.h"
#include "llm/v1/model.grpc.pb.h"
#include "model_svc/engine/engine.h"
#include "model_svc/testing/random_model.h"
#include "tests/server_process.h"

namespace llm {
namespace {

using testing::CheckHealth;
using ::testing::Contains;
using ::testing::HasSubstr;
using testing::HealthResult;
using ::testing::Not;
using testing::ServerProcess;
using ::testing::StartsWith;
using ServerState = testing::ServerState<v1::Model>;

// ---------------------------------------------------------------------------
// The model file.

model::testing::RandomModelSpec Spec() {
  model::testing::RandomModelSpec spec;  // llama, vocab 512, d_model 128, 2 layers, 4/2 heads
  spec.name = "random-llama-service-test";
  spec.context = 4096;  // more than the limits server's KV pool (2048 positions)
  spec.seed = 7;
  return spec;
}

constexpr int64_t kVocab = 512;
constexpr int64_t kMaxContext = 64;     // the main server's --max_context
constexpr int64_t kMainKvCacheMb = 16;  // the main server's --kv_cache_mb
constexpr char kSessionPrefix[] = "replica-0.";

// KV block bytes of Spec(): keys and values, every layer, 16 positions.
int64_t BlockBytes() {
  const model::testing::RandomModelSpec spec = Spec();
  // The server's default fp16 cache: 2 bytes per element.
  return 2 * spec.layers * 16 * spec.kv_heads * spec.head_dim_or_default() * 2;
}

std::string* model_path = nullptr;  // written once by ModelFileEnvironment
std::string* model_error = nullptr;

class ModelFileEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    model_path =
        new std::string(StrCat(::testing::TempDir(), "model_service_test_", getpid(), ".gguf"));
    model_error = new std::string();
    absl::StatusOr<std::string> bytes = model::testing::RandomModelGguf(Spec());
    if (!bytes.ok()) {
      *model_error = StrCat("RandomModelGguf: ", bytes.status().message());
      return;
    }
    std::ofstream out(*model_path, std::ios::binary | std::ios::trunc);
    out.write(bytes->data(), static_cast<std::streamsize>(bytes->size()));
    if (!out) *model_error = StrCat("cannot write ", *model_path);
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove(*model_path, ignored);
  }
};

::testing::Environment* const model_file_env =
    ::testing::AddGlobalTestEnvironment(new ModelFileEnvironment);

// ---------------------------------------------------------------------------
// Logits on the wire.

std::vector<float> Float32s(const v1::Logits& logits) {
  std::vector<float> out(logits.float32().size() / 4);
  std::memcpy(out.data(), logits.float32().data(), out.size() * 4);  // little-endian host
  return out;
}

std::vector<float> Float16s(const v1::Logits& logits) {
  std::vector<float> out(logits.float16().size() / 2);
  for (size_t i = 0; i < out.size(); ++i) {
    uint16_t h;
    std::memcpy(&h, logits.float16().data() + 2 * i, 2);
    out[i] = HalfToFloat(h);
  }
  return out;
}

float MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  float d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

int64_t Argmax(const std::vector<float>& v) {
  return std::max_element(v.begin(), v.end()) - v.begin();
}

double LogSumExpOf(const std::vector<float>& v) {
  const double m = *std::max_element(v.begin(), v.end());
  double s = 0;
  for (float x : v) s += std::exp(static_cast<double>(x) - m);
  return m + std::log(s);
}

// The same distribution: close logits and the same argmax.
void ExpectSameLogits(const std::vector<float>& got, const std::vector<float>& want,
                      const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  EXPECT_LT(MaxAbsDiff(got, want), 1e-4f) << what;
  EXPECT_EQ(Argmax(got), Argmax(want)) << what;
}

v1::LogitsOptions Encoding(v1::LogitsOptions::Encoding encoding, uint32_t top_n = 0) {
  v1::LogitsOptions options;
  options.set_encoding(encoding);
  options.set_top_n(top_n);
  return options;
}

// n token ids, different for each seed.
std::vector<int32_t> Tokens(int seed, int n) {
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i)
    out.push_back(static_cast<int32_t>((seed * 131 + i * 37 + 7) % kVocab));
  return out;
}

std::chrono::system_clock::time_point Deadline() {
  return std::chrono::system_clock::now() + std::chrono::seconds(60);
}

std::string Describe(const grpc::Status& status) {
  return StrCat(static_cast<int>(status.error_code()), ": ", status.error_message());
}

// ---------------------------------------------------------------------------
// Calls.

grpc::Status Prefill(v1::Model::Stub& stub, const std::string& session,
                     const std::vector<int32_t>& tokens, v1::PrefillResponse* response,
                     const v1::LogitsOptions& options = {}) {
  v1::PrefillRequest request;
  request.set_session_id(session);
  request.mutable_tokens()->Assign(tokens.begin(), tokens.end());
  *request.mutable_logits() = options;
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  return stub.Prefill(&context, request, response);
}

grpc::Status Decode(v1::Model::Stub& stub, const std::string& session, int32_t token,
                    v1::DecodeTokenResponse* response, const v1::LogitsOptions& options = {},
                    bool lookahead = false) {
  v1::DecodeTokenRequest request;
  request.set_session_id(session);
  request.set_token(token);
  *request.mutable_logits() = options;
  request.set_lookahead(lookahead);
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  return stub.Decode(&context, request, response);
}

grpc::Status Truncate(v1::Model::Stub& stub, const std::string& session, int64_t n) {
  v1::TruncateRequest request;
  request.set_session_id(session);
  request.set_num_tokens(n);
  v1::TruncateResponse response;
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  return stub.Truncate(&context, request, &response);
}

grpc::Status Fork(v1::Model::Stub& stub, const std::string& session, std::string* child) {
  v1::ForkRequest request;
  request.set_session_id(session);
  v1::ForkResponse response;
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  grpc::Status status = stub.Fork(&context, request, &response);
  *child = response.session_id();
  return status;
}

grpc::Status Release(v1::Model::Stub& stub, const std::string& session) {
  v1::ReleaseRequest request;
  request.set_session_id(session);
  v1::ReleaseResponse response;
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  return stub.Release(&context, request, &response);
}

std::vector<v1::SessionInfo> ListSessions(v1::Model::Stub& stub) {
  v1::ListSessionsResponse response;
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  const grpc::Status status = stub.ListSessions(&context, v1::ListSessionsRequest(), &response);
  EXPECT_TRUE(status.ok()) << Describe(status);
  return {response.sessions().begin(), response.sessions().end()};
}

std::optional<v1::SessionInfo> FindSession(v1::Model::Stub& stub, const std::string& id) {
  for (const v1::SessionInfo& s : ListSessions(stub)) {
    if (s.session_id() == id) return s;
  }
  return std::nullopt;
}

// Waits until the session has no call in flight (after a cancellation).
bool WaitUntilIdle(v1::Model::Stub& stub, const std::string& id) {
  const auto deadline = testing::Clock::now() + std::chrono::seconds(10);
  while (testing::Clock::now() < deadline) {
    const std::optional<v1::SessionInfo> s = FindSession(stub, id);
    if (!s.has_value() || !s->busy()) return s.has_value();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

// Prefill that must succeed; returns the response.
v1::PrefillResponse MustPrefill(v1::Model::Stub& stub, const std::string& session,
                                const std::vector<int32_t>& tokens,
                                const v1::LogitsOptions& options = {}) {
  v1::PrefillResponse response;
  const grpc::Status status = Prefill(stub, session, tokens, &response, options);
  EXPECT_TRUE(status.ok()) << Describe(status);
  return response;
}

// Decode that must succeed; returns the float32 logits.
std::vector<float> MustDecode(v1::Model::Stub& stub, const std::string& session, int32_t token,
                              int64_t* num_tokens = nullptr) {
  v1::DecodeTokenResponse response;
  const grpc::Status status = Decode(stub, session, token, &response);
  EXPECT_TRUE(status.ok()) << Describe(status);
  if (num_tokens != nullptr) *num_tokens = response.num_tokens();
  return Float32s(response.logits());
}

// ---------------------------------------------------------------------------
// Fixture: one server per suite.

// Starts model_server on the test model with `extra_flags`.
void StartModelServer(ServerState* state, const std::vector<std::string>& extra_flags) {
  if (!model_error->empty()) {
    state->error = *model_error;
    return;
  }
  std::vector<std::string> flags = {"--model", *model_path, "--threads", "2"};
  flags.insert(flags.end(), extra_flags.begin(), extra_flags.end());
  testing::StartServer(state, "model_server", flags, std::chrono::seconds(60));
}

class ModelServerTestBase : public testing::ServerTestBase<v1::Model> {
 protected:
  // Float32 logits of `tokens` computed in a new session of their own, which
  // is released afterwards.
  std::vector<float> ReferenceLogits(const std::vector<int32_t>& tokens) const {
    const v1::PrefillResponse r = MustPrefill(stub(), "", tokens);
    EXPECT_TRUE(Release(stub(), r.session_id()).ok());
    return Float32s(r.logits());
  }
};

// ---------------------------------------------------------------------------
// The main server: --max_context 64.

class ModelServerTest : public testing::SuiteServerTest<ModelServerTest, ModelServerTestBase> {
 public:
  static void StartSuiteServer(ServerState* state) {
    StartModelServer(state, {"--max-context", std::to_string(kMaxContext), "--kv_cache_mb",
                             std::to_string(kMainKvCacheMb), "--session_prefix", kSessionPrefix,
                             "--session_ttl", "1h"});
  }
};

TEST_F(ModelServerTest, HealthAndReflection) {
  const HealthResult overall = CheckHealth(channel(), "", std::chrono::seconds(5));
  ASSERT_TRUE(overall.status.ok()) << Describe(overall.status);
  EXPECT_EQ(overall.serving_status, testing::kServing);
  const HealthResult model = CheckHealth(channel(), "llm.v1.Model", std::chrono::seconds(5));
  ASSERT_TRUE(model.status.ok()) << Describe(model.status);
  EXPECT_EQ(model.serving_status, testing::kServing);
  testing::ExpectReflectionDescribesEveryService(channel(), "llm.v1.Model",
                                                 "llm.v1.Model.DecodeStream");
}

TEST_F(ModelServerTest, InfoDescribesTheModelAndTheLimits) {
  v1::ModelInfo info;
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  const grpc::Status status = stub().Info(&context, v1::ModelInfoRequest(), &info);
  ASSERT_TRUE(status.ok()) << Describe(status);
  const model::testing::RandomModelSpec spec = Spec();
  EXPECT_EQ(info.architecture(), "llama");
  EXPECT_EQ(info.name(), spec.name);
  EXPECT_EQ(info.file_name(), StrCat("model_service_test_", getpid(), ".gguf"));  // no directory
  EXPECT_EQ(info.vocab_size(), kVocab);
  EXPECT_EQ(info.context_length(), kMaxContext);  // capped by --max_context
  EXPECT_EQ(info.embedding_length(), spec.d_model);
  EXPECT_EQ(info.block_count(), spec.layers);
  EXPECT_EQ(info.head_count(), spec.heads);
  EXPECT_EQ(info.head_count_kv(), spec.kv_heads);
  EXPECT_EQ(info.feed_forward_length(), spec.ff);
  EXPECT_FALSE(info.backend().empty());
  EXPECT_EQ(info.max_batch_tokens(), 512);
  EXPECT_EQ(info.max_sessions(), 256);
  EXPECT_EQ(info.kv_cache_blocks(), kMainKvCacheMb * (1 << 20) / BlockBytes());
  EXPECT_EQ(info.kv_block_size(), 16);
  EXPECT_DOUBLE_EQ(info.session_ttl_seconds(), 3600);
  EXPECT_TRUE(info.prefix_cache());
}

TEST_F(ModelServerTest, PrefillNewSessionInEveryEncoding) {
  const std::vector<int32_t> prompt = Tokens(1, 8);
  const v1::PrefillResponse f32 = MustPrefill(stub(), "", prompt);
  EXPECT_THAT(f32.session_id(), StartsWith(kSessionPrefix));
  EXPECT_GT(f32.session_id().size(), sizeof(kSessionPrefix) - 1);
  EXPECT_EQ(f32.num_tokens(), 8);
  EXPECT_EQ(f32.logits().encoding(), v1::LogitsOptions::LOGITS_FLOAT32);
  ASSERT_EQ(f32.logits().float32().size(), 4u * kVocab);
  EXPECT_TRUE(f32.logits().float16().empty());
  EXPECT_EQ(f32.logits().top_ids_size(), 0);
  const std::vector<float> logits = Float32s(f32.logits());
  for (float x : logits) ASSERT_TRUE(std::isfinite(x));
  const double lse = LogSumExpOf(logits);
  EXPECT_NEAR(f32.logits().log_sum_exp(), lse, 1e-3 * std::max(1.0, std::fabs(lse)));

  const v1::PrefillResponse f16 =
      MustPrefill(stub(), "", prompt, Encoding(v1::LogitsOptions::LOGITS_FLOAT16));
  EXPECT_NE(f16.session_id(), f32.session_id());
  EXPECT_EQ(f16.num_tokens(), 8);
  EXPECT_EQ(f16.logits().encoding(), v1::LogitsOptions::LOGITS_FLOAT16);
  ASSERT_EQ(f16.logits().float16().size(), 2u * kVocab);
  EXPECT_TRUE(f16.logits().float32().empty());
  const std::vector<float> halves = Float16s(f16.logits());
  for (size_t i = 0; i < halves.size(); ++i) {
    ASSERT_NEAR(halves[i], logits[i], 1e-3 * std::fabs(logits[i]) + 1e-4) << "id " << i;
  }
  EXPECT_NEAR(f16.logits().log_sum_exp(), lse, 1e-3 * std::max(1.0, std::fabs(lse)));

  constexpr int kTopN = 10;
  const v1::PrefillResponse top =
      MustPrefill(stub(), "", prompt, Encoding(v1::LogitsOptions::LOGITS_TOP_N, kTopN));
  EXPECT_EQ(top.logits().encoding(), v1::LogitsOptions::LOGITS_TOP_N);
  EXPECT_TRUE(top.logits().float32().empty());
  EXPECT_TRUE(top.logits().float16().empty());
  ASSERT_EQ(top.logits().top_ids_size(), kTopN);
  ASSERT_EQ(top.logits().top_logits_size(), kTopN);
  std::vector<float> sorted = logits;
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  for (int i = 0; i < kTopN; ++i) {
    const int32_t id = top.logits().top_ids(i);
    ASSERT_GE(id, 0);
    ASSERT_LT(id, kVocab);
    EXPECT_NEAR(top.logits().top_logits(i), logits[static_cast<size_t>(id)], 1e-4) << "rank " << i;
    EXPECT_NEAR(top.logits().top_logits(i), sorted[static_cast<size_t>(i)], 1e-4) << "rank " << i;
    if (i > 0) {
      EXPECT_LE(top.logits().top_logits(i), top.logits().top_logits(i - 1));
    }
  }
  EXPECT_EQ(top.logits().top_ids(0), Argmax(logits));
  EXPECT_NEAR(top.logits().log_sum_exp(), lse, 1e-3 * std::max(1.0, std::fabs(lse)));
  // top_n may be the whole vocabulary.
  const v1::PrefillResponse all =
      MustPrefill(stub(), "", prompt, Encoding(v1::LogitsOptions::LOGITS_TOP_N, kVocab));
  EXPECT_EQ(all.logits().top_ids_size(), kVocab);

  for (const auto* r : {&f32, &f16, &top, &all}) {
    EXPECT_TRUE(Release(stub(), r->session_id()).ok());
  }
}

TEST_F(ModelServerTest, PrefillAppendsToAnExistingSession) {
  const std::vector<int32_t> first = Tokens(2, 5);
  const std::vector<int32_t> second = Tokens(3, 7);
  std::vector<int32_t> both = first;
  both.insert(both.end(), second.begin(), second.end());

  const v1::PrefillResponse a = MustPrefill(stub(), "", first);
  EXPECT_EQ(a.num_tokens(), 5);
  const v1::PrefillResponse b = MustPrefill(stub(), a.session_id(), second);
  EXPECT_EQ(b.session_id(), a.session_id());
  EXPECT_EQ(b.num_tokens(), 12);
  ExpectSameLogits(Float32s(b.logits()), ReferenceLogits(both), "appended vs in one prefill");
  EXPECT_TRUE(Release(stub(), a.session_id()).ok());
}

// The prefix cache (on by default): a new session whose prompt starts with
// another's finds its full blocks (16 positions each) and says how many
// tokens it did not compute; its logits equal those of appending to the
// first session, which computed everything.
TEST_F(ModelServerTest, PrefillReportsCachedTokensAndTheSameLogits) {
  const std::vector<int32_t> prompt = Tokens(997, 40);
  const std::vector<int32_t> more = Tokens(998, 2);
  std::vector<int32_t> both = prompt;
  both.insert(both.end(), more.begin(), more.end());

  const v1::PrefillResponse a = MustPrefill(stub(), "", prompt);
  EXPECT_EQ(a.cached_tokens(), 0);
  const v1::PrefillResponse b = MustPrefill(stub(), "", both);
  EXPECT_EQ(b.cached_tokens(), 32);
  EXPECT_EQ(b.num_tokens(), 42);
  const v1::PrefillResponse a2 = MustPrefill(stub(), a.session_id(), more);
  EXPECT_EQ(a2.cached_tokens(), 0);
  ExpectSameLogits(Float32s(b.logits()), Float32s(a2.logits()), "cached vs computed");
  EXPECT_TRUE(Release(stub(), a.session_id()).ok());
  EXPECT_TRUE(Release(stub(), b.session_id()).ok());
}

// prompt_logprobs: one score per appended token after the first, each the
// log-softmax of the reference logits at its position, with the position's
// top ids; appending to a session scores the new tokens after its first.
TEST_F(ModelServerTest, PrefillScoresEveryAppendedTokenAfterTheFirst) {
  const std::vector<int32_t> tokens = Tokens(4, 9);
  v1::PrefillRequest request;
  request.mutable_tokens()->Add(tokens.begin(), tokens.begin() + 6);
  request.mutable_prompt_logprobs()->set_enabled(true);
  request.mutable_prompt_logprobs()->set_top_n(4);
  *request.mutable_logits() = Encoding(v1::LogitsOptions::LOGITS_TOP_N, 2);
  v1::PrefillResponse first;
  {
    grpc::ClientContext context;
    context.set_deadline(Deadline());
    ASSERT_TRUE(stub().Prefill(&context, request, &first).ok());
  }
  EXPECT_EQ(first.logits().top_ids_size(), 2);
  request.set_session_id(first.session_id());
  request.clear_tokens();
  request.mutable_tokens()->Add(tokens.begin() + 6, tokens.end());
  v1::PrefillResponse second;
  {
    grpc::ClientContext context;
    context.set_deadline(Deadline());
    ASSERT_TRUE(stub().Prefill(&context, request, &second).ok());
  }
  ASSERT_EQ(first.prompt_logprobs_size(), 5);
  ASSERT_EQ(second.prompt_logprobs_size(), 2);
  std::vector<v1::TokenLogprob> scores(first.prompt_logprobs().begin(),
                                       first.prompt_logprobs().end());
  scores.insert(scores.end(), second.prompt_logprobs().begin(), second.prompt_logprobs().end());
  const size_t skipped = 6;  // the second call's first token has no score
  for (size_t k = 0; k < scores.size(); ++k) {
    const size_t i = k < 5 ? k + 1 : k + 2;  // the scored token's index
    ASSERT_NE(i, skipped);
    const v1::TokenLogprob& s = scores[k];
    EXPECT_EQ(s.token(), tokens[i]);
    const std::vector<float> ref = ReferenceLogits({tokens.begin(), tokens.begin() + i});
    const double lse = LogSumExpOf(ref);
    EXPECT_NEAR(s.logprob(), ref[tokens[i]] - lse, 1e-4) << i;
    ASSERT_EQ(s.top_ids_size(), 4);
    ASSERT_EQ(s.top_logprobs_size(), 4);
    EXPECT_EQ(s.top_ids(0), Argmax(ref)) << i;
    for (int j = 0; j < 4; ++j) {
      EXPECT_NEAR(s.top_logprobs(j), ref[s.top_ids(j)] - lse, 1e-4) << i;
      if (j > 0) {
        EXPECT_LE(s.top_logprobs(j), s.top_logprobs(j - 1));
      }
    }
  }
  EXPECT_TRUE(Release(stub(), first.session_id()).ok());

  request.clear_session_id();
  request.mutable_prompt_logprobs()->set_top_n(21);
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  v1::PrefillResponse refused;
  const grpc::Status status = stub().Prefill(&context, request, &refused);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << Describe(status);
  EXPECT_THAT(status.error_message(), HasSubstr("prompt_logprobs.top_n"));
}

TEST_F(ModelServerTest, DecodeAppendsOneToken) {
  const std::vector<int32_t> prompt = Tokens(4, 6);
  const v1::PrefillResponse p = MustPrefill(stub(), "", prompt);
  v1::DecodeTokenResponse d;
  const grpc::Status status =
      Decode(stub(), p.session_id(), 42, &d, Encoding(v1::LogitsOptions::LOGITS_TOP_N, 3));
  ASSERT_TRUE(status.ok()) << Describe(status);
  EXPECT_EQ(d.num_tokens(), 7);
  EXPECT_EQ(d.logits().top_ids_size(), 3);
  int64_t n = 0;
  const std::vector<float> next = MustDecode(stub(), p.session_id(), 43, &n);
  EXPECT_EQ(n, 8);
  std::vector<int32_t> all = prompt;
  all.push_back(42);
  all.push_back(43);
  ExpectSameLogits(next, ReferenceLogits(all), "decoded vs prefilled");
  EXPECT_TRUE(Release(stub(), p.session_id()).ok());
}

TEST_F(ModelServerTest, DecodeStreamEqualsUnaryDecodesOnAFork) {
  const v1::PrefillResponse p = MustPrefill(stub(), "", Tokens(5, 8));
  std::string fork;
  ASSERT_TRUE(Fork(stub(), p.session_id(), &fork).ok());
  const std::vector<int32_t> tokens = Tokens(6, 16);

  // Unary on the fork.
  std::vector<std::vector<float>> unary;
  for (size_t i = 0; i < tokens.size(); ++i) {
    int64_t n = 0;
    unary.push_back(MustDecode(stub(), fork, tokens[i], &n));
    EXPECT_EQ(n, 9 + static_cast<int64_t>(i));
  }

  // Streamed on the original: all requests written first, then read.
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  auto stream = stub().DecodeStream(&context);
  for (int32_t t : tokens) {
    v1::DecodeTokenRequest request;
    request.set_session_id(p.session_id());
    request.set_token(t);
    ASSERT_TRUE(stream->Write(request));
  }
  ASSERT_TRUE(stream->WritesDone());
  v1::DecodeTokenResponse response;
  size_t i = 0;
  while (stream->Read(&response)) {
    ASSERT_LT(i, tokens.size());
    EXPECT_EQ(response.num_tokens(), 9 + static_cast<int64_t>(i));
    ExpectSameLogits(Float32s(response.logits()), unary[i], StrCat("step ", i));
    ++i;
  }
  const grpc::Status status = stream->Finish();
  EXPECT_TRUE(status.ok()) << Describe(status);
  EXPECT_EQ(i, tokens.size());
  EXPECT_TRUE(Release(stub(), p.session_id()).ok());
  EXPECT_TRUE(Release(stub(), fork).ok());
}

TEST_F(ModelServerTest, PrefillWithLookaheadGivesTheSameLogits) {
  const std::vector<int32_t> prompt = Tokens(22, 6);
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  v1::PrefillRequest request;
  request.mutable_tokens()->Add(prompt.begin(), prompt.end());
  request.set_lookahead(true);
  v1::PrefillResponse p;
  const grpc::Status status = stub().Prefill(&context, request, &p);
  ASSERT_TRUE(status.ok()) << Describe(status);
  const std::vector<float> logits = Float32s(p.logits());
  const int32_t next =
      static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  std::vector<int32_t> all = prompt;
  all.push_back(next);
  int64_t n = 0;
  ExpectSameLogits(MustDecode(stub(), p.session_id(), next, &n), ReferenceLogits(all), "guessed");
  EXPECT_EQ(n, 7);
  const std::optional<v1::SessionInfo> s = FindSession(stub(), p.session_id());
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->num_tokens(), 7);
  EXPECT_EQ(s->prefilled_tokens(), 6);
  EXPECT_EQ(s->decoded_tokens(), 1);
  EXPECT_TRUE(Release(stub(), p.session_id()).ok());
}

TEST_F(ModelServerTest, DecodeStreamWithLookaheadGivesTheSameLogits) {
  // A greedy client: each request appends the argmax of the last logits and
  // says so; the server computes each guess ahead.
  const std::vector<int32_t> prompt = Tokens(21, 5);
  const v1::PrefillResponse p = MustPrefill(stub(), "", prompt);
  auto argmax = [](const std::vector<float>& v) {
    return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
  };
  std::vector<int32_t> all = prompt;
  std::vector<float> logits = Float32s(p.logits());
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  auto stream = stub().DecodeStream(&context);
  for (int i = 0; i < 8; ++i) {
    v1::DecodeTokenRequest request;
    request.set_session_id(p.session_id());
    request.set_token(argmax(logits));
    request.set_lookahead(true);
    all.push_back(request.token());
    ASSERT_TRUE(stream->Write(request));
    v1::DecodeTokenResponse response;
    ASSERT_TRUE(stream->Read(&response));
    EXPECT_EQ(response.num_tokens(), static_cast<int64_t>(all.size()));
    logits = Float32s(response.logits());
    ExpectSameLogits(logits, ReferenceLogits(all), StrCat("step ", i));
  }
  ASSERT_TRUE(stream->WritesDone());
  const grpc::Status status = stream->Finish();
  EXPECT_TRUE(status.ok()) << Describe(status);
  // The server's last guess is not part of the session.
  const std::optional<v1::SessionInfo> s = FindSession(stub(), p.session_id());
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->num_tokens(), static_cast<int64_t>(all.size()));
  EXPECT_EQ(s->decoded_tokens(), 8);
  // Another token than the guess: the guess is dropped, the logits are right.
  all.push_back(7);
  int64_t n = 0;
  ExpectSameLogits(MustDecode(stub(), p.session_id(), 7, &n), ReferenceLogits(all), "after");
  EXPECT_EQ(n, static_cast<int64_t>(all.size()));
  EXPECT_TRUE(Release(stub(), p.session_id()).ok());
}

TEST_F(ModelServerTest, DecodeStreamInterleavedWritesAndReadsOverTwoSessions) {
  const v1::PrefillResponse p = MustPrefill(stub(), "", Tokens(7, 4));
  const v1::PrefillResponse q = MustPrefill(stub(), "", Tokens(8, 6));
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  auto stream = stub().DecodeStream(&context);
  for (int i = 0; i < 6; ++i) {
    const bool on_p = i % 2 == 0;
    v1::DecodeTokenRequest request;
    request.set_session_id(on_p ? p.session_id() : q.session_id());
    request.set_token(i);
    *request.mutable_logits() = Encoding(v1::LogitsOptions::LOGITS_TOP_N, 2);
    ASSERT_TRUE(stream->Write(request));
    v1::DecodeTokenResponse response;
    ASSERT_TRUE(stream->Read(&response));
    EXPECT_EQ(response.num_tokens(), (on_p ? 5 : 7) + i / 2) << i;
    EXPECT_EQ(response.logits().top_ids_size(), 2);
  }
  ASSERT_TRUE(stream->WritesDone());
  v1::DecodeTokenResponse extra;
  EXPECT_FALSE(stream->Read(&extra));
  const grpc::Status status = stream->Finish();
  EXPECT_TRUE(status.ok()) << Describe(status);
  EXPECT_EQ(FindSession(stub(), p.session_id())->decoded_tokens(), 3);
  EXPECT_EQ(FindSession(stub(), q.session_id())->decoded_tokens(), 3);
  EXPECT_TRUE(Release(stub(), p.session_id()).ok());
  EXPECT_TRUE(Release(stub(), q.session_id()).ok());
}

TEST_F(ModelServerTest, EmptyDecodeStreamEndsOk) {
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  auto stream = stub().DecodeStream(&context);
  ASSERT_TRUE(stream->WritesDone());
  v1::DecodeTokenResponse response;
  EXPECT_FALSE(stream->Read(&response));
  const grpc::Status status = stream->Finish();
  EXPECT_TRUE(status.ok()) << Describe(status);
}

TEST_F(ModelServerTest, DecodeStreamEndsWithTheFirstError) {
  const v1::PrefillResponse p = MustPrefill(stub(), "", Tokens(8, 4));
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  auto stream = stub().DecodeStream(&context);
  v1::DecodeTokenRequest request;
  request.set_session_id(p.session_id());
  request.set_token(1);
  ASSERT_TRUE(stream->Write(request));
  v1::DecodeTokenResponse response;
  ASSERT_TRUE(stream->Read(&response));
  request.set_token(static_cast<int32_t>(kVocab));  // out of range
  stream->Write(request);
  EXPECT_FALSE(stream->Read(&response));
  const grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << Describe(status);
  EXPECT_THAT(status.error_message(), HasSubstr(std::to_string(kVocab)));
  // The session is still there, one token longer.
  int64_t n = 0;
  MustDecode(stub(), p.session_id(), 2, &n);
  EXPECT_EQ(n, 6);

  grpc::ClientContext unknown_context;
  unknown_context.set_deadline(Deadline());
  auto unknown = stub().DecodeStream(&unknown_context);
  request.set_session_id("no-such-session");
  request.set_token(1);
  unknown->Write(request);
  EXPECT_FALSE(unknown->Read(&response));
  EXPECT_EQ(unknown->Finish().error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(Release(stub(), p.session_id()).ok());
}

TEST_F(ModelServerTest, TruncateThenRedecodeGivesTheSameLogits) {
  const v1::PrefillResponse p = MustPrefill(stub(), "", Tokens(9, 10));
  const std::vector<int32_t> tokens = Tokens(10, 5);
  std::vector<std::vector<float>> before;
  for (int32_t t : tokens) before.push_back(MustDecode(stub(), p.session_id(), t));
  ASSERT_TRUE(Truncate(stub(), p.session_id(), 12).ok());
  EXPECT_EQ(FindSession(stub(), p.session_id())->num_tokens(), 12);
  for (size_t i = 2; i < tokens.size(); ++i) {
    int64_t n = 0;
    ExpectSameLogits(MustDecode(stub(), p.session_id(), tokens[i], &n), before[i],
                     StrCat("token ", i));
    EXPECT_EQ(n, 11 + static_cast<int64_t>(i));
  }
  // Back past a block boundary (16) and into the prompt.
  ASSERT_TRUE(Truncate(stub(), p.session_id(), 3).ok());
  std::vector<int32_t> prefix = Tokens(9, 10);
  prefix.resize(3);
  prefix.push_back(77);
  ExpectSameLogits(MustDecode(stub(), p.session_id(), 77), ReferenceLogits(prefix),
                   "after truncating to 3");
  // Longer than the session, or negative.
  EXPECT_EQ(Truncate(stub(), p.session_id(), 5).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Truncate(stub(), p.session_id(), -1).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  ASSERT_TRUE(Truncate(stub(), p.session_id(), 0).ok());
  EXPECT_EQ(FindSession(stub(), p.session_id())->num_tokens(), 0);
  EXPECT_TRUE(Release(stub(), p.session_id()).ok());
}

TEST_F(ModelServerTest, ForkSharesTheHistoryThenDiverges) {
  const v1::PrefillResponse p = MustPrefill(stub(), "", Tokens(11, 20));  // over a block
  std::string child;
  const grpc::Status status = Fork(stub(), p.session_id(), &child);
  ASSERT_TRUE(status.ok()) << Describe(status);
  EXPECT_NE(child, p.session_id());
  EXPECT_THAT(child, StartsWith(kSessionPrefix));
  ASSERT_TRUE(FindSession(stub(), child).has_value());
  EXPECT_EQ(FindSession(stub(), child)->num_tokens(), 20);
  // Same token: same logits. Different tokens: each its own history.
  ExpectSameLogits(MustDecode(stub(), child, 5), MustDecode(stub(), p.session_id(), 5),
                   "same token on both");
  const std::vector<float> on_child = MustDecode(stub(), child, 6);
  const std::vector<float> on_parent = MustDecode(stub(), p.session_id(), 7);
  std::vector<int32_t> child_tokens = Tokens(11, 20);
  child_tokens.push_back(5);
  std::vector<int32_t> parent_tokens = child_tokens;
  child_tokens.push_back(6);
  parent_tokens.push_back(7);
  ExpectSameLogits(on_child, ReferenceLogits(child_tokens), "child");
  ExpectSameLogits(on_parent, ReferenceLogits(parent_tokens), "parent");
  // Releasing the parent leaves the child intact.
  ASSERT_TRUE(Release(stub(), p.session_id()).ok());
  child_tokens.push_back(8);
  ExpectSameLogits(MustDecode(stub(), child, 8), ReferenceLogits(child_tokens),
                   "child after the parent's release");
  EXPECT_TRUE(Release(stub(), child).ok());
}

TEST_F(ModelServerTest, ReleaseThenNotFound) {
  const v1::PrefillResponse p = MustPrefill(stub(), "", Tokens(12, 3));
  ASSERT_TRUE(Release(stub(), p.session_id()).ok());
  EXPECT_FALSE(FindSession(stub(), p.session_id()).has_value());
  v1::DecodeTokenResponse d;
  EXPECT_EQ(Decode(stub(), p.session_id(), 1, &d).error_code(), grpc::StatusCode::NOT_FOUND);
  v1::PrefillResponse r;
  EXPECT_EQ(Prefill(stub(), p.session_id(), {1}, &r).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Release(stub(), p.session_id()).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(ModelServerTest, ListSessionsCountsPrefilledAndDecodedTokens) {
  const v1::PrefillResponse p = MustPrefill(stub(), "", Tokens(13, 5));
  MustPrefill(stub(), p.session_id(), Tokens(14, 3));
  MustDecode(stub(), p.session_id(), 1);
  MustDecode(stub(), p.session_id(), 2);
  const std::optional<v1::SessionInfo> s = FindSession(stub(), p.session_id());
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->num_tokens(), 10);
  EXPECT_EQ(s->prefilled_tokens(), 8);
  EXPECT_EQ(s->decoded_tokens(), 2);
  EXPECT_EQ(s->kv_blocks(), 1);
  EXPECT_FALSE(s->busy());
  EXPECT_GE(s->idle_seconds(), 0);
  EXPECT_LT(s->idle_seconds(), 60);
  EXPECT_TRUE(Release(stub(), p.session_id()).ok());
}

TEST_F(ModelServerTest, ErrorCodes) {
  const v1::PrefillResponse p = MustPrefill(stub(), "", Tokens(15, 4));
  const std::string id = p.session_id();
  v1::PrefillResponse pr;
  v1::DecodeTokenResponse dr;
  std::string child;

  // Unknown session.
  EXPECT_EQ(Prefill(stub(), "no-such-session", {1}, &pr).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Decode(stub(), "no-such-session", 1, &dr).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Truncate(stub(), "no-such-session", 0).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Fork(stub(), "no-such-session", &child).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Release(stub(), "no-such-session").error_code(), grpc::StatusCode::NOT_FOUND);

  // Tokens out of range, in Prefill (new and existing sessions) and Decode.
  grpc::Status status = Prefill(stub(), "", {1, static_cast<int32_t>(kVocab), 2}, &pr);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << Describe(status);
  EXPECT_THAT(status.error_message(), HasSubstr(std::to_string(kVocab)));
  EXPECT_EQ(Prefill(stub(), id, {-1}, &pr).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Decode(stub(), id, static_cast<int32_t>(kVocab), &dr).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Decode(stub(), id, -5, &dr).error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  // Empty tokens; a missing session id where one is required.
  EXPECT_EQ(Prefill(stub(), "", {}, &pr).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Prefill(stub(), id, {}, &pr).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Decode(stub(), "", 1, &dr).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Truncate(stub(), "", 0).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Fork(stub(), "", &child).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Release(stub(), "").error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  // Logits options.
  for (uint32_t top_n : {0u, static_cast<uint32_t>(kVocab) + 1}) {
    status = Prefill(stub(), id, {1}, &pr, Encoding(v1::LogitsOptions::LOGITS_TOP_N, top_n));
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << top_n;
    status = Decode(stub(), id, 1, &dr, Encoding(v1::LogitsOptions::LOGITS_TOP_N, top_n));
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << top_n;
  }
  v1::LogitsOptions bad;
  bad.set_encoding(static_cast<v1::LogitsOptions::Encoding>(7));
  EXPECT_EQ(Prefill(stub(), id, {1}, &pr, bad).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Decode(stub(), id, 1, &dr, bad).error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  // None of it changed the session.
  EXPECT_EQ(FindSession(stub(), id)->num_tokens(), 4);
  EXPECT_TRUE(Release(stub(), id).ok());
}

// A speculative Decode: `token` and `proposed` after it, with truncate_to
// (>= 0) first.
grpc::Status SpeculativeDecode(v1::Model::Stub& stub, const std::string& session, int32_t token,
                               const std::vector<int32_t>& proposed, int64_t truncate_to,
                               v1::DecodeTokenResponse* response) {
  v1::DecodeTokenRequest request;
  request.set_session_id(session);
  request.set_token(token);
  request.mutable_proposed()->Assign(proposed.begin(), proposed.end());
  if (truncate_to >= 0) request.set_truncate_to(truncate_to);
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  return stub.Decode(&context, request, response);
}

TEST_F(ModelServerTest, SpeculativeDecodeReturnsTheLogitsOfEveryProposedToken) {
  const std::vector<int32_t> prompt = Tokens(21, 5);
  const v1::PrefillResponse p = MustPrefill(stub(), "", prompt);
  const std::string id = p.session_id();
  v1::DecodeTokenResponse d;
  grpc::Status status = SpeculativeDecode(stub(), id, 42, {43, 44, 45}, -1, &d);
  ASSERT_TRUE(status.ok()) << Describe(status);
  EXPECT_EQ(d.num_tokens(), 9);
  ASSERT_EQ(d.proposed_logits_size(), 3);
  std::vector<int32_t> all = prompt;
  all.push_back(42);
  ExpectSameLogits(Float32s(d.logits()), ReferenceLogits(all), "after the sampled token");
  for (int i = 0; i < 3; ++i) {
    all.push_back(43 + i);
    ExpectSameLogits(Float32s(d.proposed_logits(i)), ReferenceLogits(all),
                     StrCat("after proposed token ", i));
  }
  EXPECT_EQ(FindSession(stub(), id)->decoded_tokens(), 4);

  // The client accepted 43 only: the next request drops 44 and 45 first.
  status = SpeculativeDecode(stub(), id, 50, {}, /*truncate_to=*/7, &d);
  ASSERT_TRUE(status.ok()) << Describe(status);
  EXPECT_EQ(d.num_tokens(), 8);
  EXPECT_EQ(d.proposed_logits_size(), 0);
  std::vector<int32_t> kept = prompt;
  kept.insert(kept.end(), {42, 43, 50});
  ExpectSameLogits(Float32s(d.logits()), ReferenceLogits(kept), "after truncate_to");

  // On a stream, and a Prefill's truncate_to (the next turn).
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  auto stream = stub().DecodeStream(&context);
  v1::DecodeTokenRequest request;
  request.set_session_id(id);
  request.set_token(60);
  request.add_proposed(61);
  ASSERT_TRUE(stream->Write(request));
  ASSERT_TRUE(stream->Read(&d));
  EXPECT_EQ(d.num_tokens(), 10);
  ASSERT_EQ(d.proposed_logits_size(), 1);
  ASSERT_TRUE(stream->WritesDone());
  EXPECT_TRUE(stream->Finish().ok());
  v1::PrefillRequest prefill;
  prefill.set_session_id(id);
  prefill.add_tokens(70);
  prefill.set_truncate_to(9);  // 61 rejected
  v1::PrefillResponse pr;
  grpc::ClientContext prefill_context;
  prefill_context.set_deadline(Deadline());
  status = stub().Prefill(&prefill_context, prefill, &pr);
  ASSERT_TRUE(status.ok()) << Describe(status);
  EXPECT_EQ(pr.num_tokens(), 10);
  kept.insert(kept.end(), {60, 70});
  ExpectSameLogits(Float32s(pr.logits()), ReferenceLogits(kept), "after a prefill's truncate_to");
  EXPECT_TRUE(Release(stub(), id).ok());
}

TEST_F(ModelServerTest, BadSpeculativeDecodesAreInvalidAndChangeNothing) {
  const v1::PrefillResponse p = MustPrefill(stub(), "", Tokens(22, 6));
  const std::string id = p.session_id();
  v1::DecodeTokenResponse d;
  const std::vector<int32_t> too_many(kMaxProposedTokens + 1, 3);
  grpc::Status status = SpeculativeDecode(stub(), id, 1, too_many, -1, &d);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << Describe(status);
  EXPECT_THAT(status.error_message(), HasSubstr("more than the limit of 16"));
  status = SpeculativeDecode(stub(), id, 1, {2}, /*truncate_to=*/7, &d);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << Describe(status);
  EXPECT_THAT(status.error_message(), HasSubstr("past the session's length of 6"));
  v1::DecodeTokenRequest negative;
  negative.set_session_id(id);
  negative.set_token(1);
  negative.set_truncate_to(-1);
  {
    grpc::ClientContext context;
    context.set_deadline(Deadline());
    status = stub().Decode(&context, negative, &d);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << Describe(status);
  }
  status = SpeculativeDecode(stub(), id, 1, {2, static_cast<int32_t>(kVocab)}, 3, &d);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << Describe(status);
  EXPECT_THAT(status.error_message(), HasSubstr("at index 2"));
  v1::PrefillRequest prefill;
  prefill.add_tokens(1);
  prefill.set_truncate_to(0);  // no session to roll back
  v1::PrefillResponse pr;
  {
    grpc::ClientContext context;
    context.set_deadline(Deadline());
    status = stub().Prefill(&context, prefill, &pr);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << Describe(status);
  }
  // On a stream, the first bad request ends it with its status.
  {
    grpc::ClientContext context;
    context.set_deadline(Deadline());
    auto stream = stub().DecodeStream(&context);
    v1::DecodeTokenRequest request;
    request.set_session_id(id);
    request.set_token(1);
    request.set_truncate_to(100);
    ASSERT_TRUE(stream->Write(request));
    EXPECT_FALSE(stream->Read(&d));
    EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  }
  const std::optional<v1::SessionInfo> s = FindSession(stub(), id);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->num_tokens(), 6);
  EXPECT_FALSE(s->busy());
  EXPECT_EQ(s->decoded_tokens(), 0);
  EXPECT_TRUE(Release(stub(), id).ok());
}

TEST_F(ModelServerTest, PastTheContextIsOutOfRange) {
  v1::PrefillResponse pr;
  v1::DecodeTokenResponse dr;
  // A new session longer than the context.
  grpc::Status status = Prefill(stub(), "", Tokens(16, kMaxContext + 1), &pr);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::OUT_OF_RANGE) << Describe(status);
  // Growing an existing one past it, by Prefill and by Decode.
  const v1::PrefillResponse p = MustPrefill(stub(), "", Tokens(17, kMaxContext - 2));
  status = Prefill(stub(), p.session_id(), Tokens(18, 3), &pr);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::OUT_OF_RANGE) << Describe(status);
  EXPECT_EQ(MustPrefill(stub(), p.session_id(), {3, 4}).num_tokens(), kMaxContext);  // exactly full
  status = Decode(stub(), p.session_id(), 5, &dr);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::OUT_OF_RANGE) << Describe(status);
  // The session stays usable after a rollback.
  ASSERT_TRUE(Truncate(stub(), p.session_id(), kMaxContext - 1).ok());
  int64_t n = 0;
  MustDecode(stub(), p.session_id(), 5, &n);
  EXPECT_EQ(n, kMaxContext);
  EXPECT_TRUE(Release(stub(), p.session_id()).ok());
}

TEST_F(ModelServerTest, ConcurrentSessionsGetTheLogitsTheyGetAlone) {
  constexpr int kSessions = 8;
  constexpr int kSteps = 16;
  std::vector<std::vector<int32_t>> prompts, decodes;
  for (int s = 0; s < kSessions; ++s) {
    prompts.push_back(Tokens(100 + s, 6 + s));
    decodes.push_back(Tokens(200 + s, kSteps));
  }
  // Alone, one session after the other. Odd sessions decode greedily (each
  // token the argmax of the last logits), even ones fixed tokens.
  std::vector<std::vector<std::vector<float>>> alone(kSessions);
  for (int s = 0; s < kSessions; ++s) {
    const v1::PrefillResponse p = MustPrefill(stub(), "", prompts[s]);
    std::vector<float> last = Float32s(p.logits());
    for (int i = 0; i < kSteps; ++i) {
      if (s % 2 == 1) {
        decodes[s][i] =
            static_cast<int32_t>(std::max_element(last.begin(), last.end()) - last.begin());
      }
      last = MustDecode(stub(), p.session_id(), decodes[s][i]);
      alone[s].push_back(last);
    }
    EXPECT_TRUE(Release(stub(), p.session_id()).ok());
  }
  // All at once: prefill, wait for every thread, then decode, each request
  // with lookahead (the odd sessions' guesses are right, the even ones'
  // mostly wrong).
  std::vector<std::vector<std::vector<float>>> together(kSessions);
  std::vector<std::string> errors(kSessions);
  std::barrier sync(kSessions);
  std::vector<std::thread> threads;
  for (int s = 0; s < kSessions; ++s) {
    threads.emplace_back([&, s] {
      v1::PrefillResponse p;
      grpc::Status status = Prefill(stub(), "", prompts[s], &p);
      sync.arrive_and_wait();
      if (!status.ok()) {
        errors[s] = StrCat("prefill: ", Describe(status));
        return;
      }
      for (int32_t t : decodes[s]) {
        v1::DecodeTokenResponse d;
        status = Decode(stub(), p.session_id(), t, &d, {}, /*lookahead=*/true);
        if (!status.ok()) {
          errors[s] = StrCat("decode: ", Describe(status));
          break;
        }
        together[s].push_back(Float32s(d.logits()));
      }
      Release(stub(), p.session_id());
    });
  }
  for (std::thread& t : threads) t.join();
  for (int s = 0; s < kSessions; ++s) {
    ASSERT_EQ(errors[s], "") << "session " << s;
    ASSERT_EQ(together[s].size(), static_cast<size_t>(kSteps));
    for (int i = 0; i < kSteps; ++i) {
      ExpectSameLogits(together[s][i], alone[s][i], StrCat("session ", s, " step ", i));
    }
  }
}

TEST_F(ModelServerTest, CancelledDecodeStreamLeavesTheSessionUsable) {
  const std::vector<int32_t> prompt = Tokens(20, 8);
  const v1::PrefillResponse p = MustPrefill(stub(), "", prompt);
  std::string reference;
  ASSERT_TRUE(Fork(stub(), p.session_id(), &reference).ok());
  const std::vector<float> first = MustDecode(stub(), reference, 10);
  const std::vector<float> second = MustDecode(stub(), reference, 11);

  {
    grpc::ClientContext context;
    context.set_deadline(Deadline());
    auto stream = stub().DecodeStream(&context);
    v1::DecodeTokenRequest request;
    request.set_session_id(p.session_id());
    request.set_token(10);
    ASSERT_TRUE(stream->Write(request));
    v1::DecodeTokenResponse response;
    ASSERT_TRUE(stream->Read(&response));
    ExpectSameLogits(Float32s(response.logits()), first, "before the cancellation");
    request.set_token(11);
    stream->Write(request);
    context.TryCancel();
    while (stream->Read(&response)) {
    }
    const grpc::Status status = stream->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::CANCELLED) << Describe(status);
  }
  // The session is there, with or without the second token. The second
  // request may still be on its way when the client has its CANCELLED (the
  // server reads it before or after it learns of the cancellation), so the
  // session can turn busy once more: a Decode then gets ABORTED, and the test
  // waits and starts over, at most once.
  v1::DecodeTokenResponse response;
  grpc::Status status;
  for (int attempt = 0; attempt < 2; ++attempt) {
    ASSERT_TRUE(WaitUntilIdle(stub(), p.session_id())) << "session lost or still busy";
    const int64_t n = FindSession(stub(), p.session_id())->num_tokens();
    EXPECT_TRUE(n == 9 || n == 10) << n;
    const grpc::Status truncated = Truncate(stub(), p.session_id(), 9);
    if (truncated.error_code() == grpc::StatusCode::ABORTED) continue;
    ASSERT_TRUE(truncated.ok()) << Describe(truncated);
    status = Decode(stub(), p.session_id(), 11, &response);
    if (status.error_code() != grpc::StatusCode::ABORTED) break;
  }
  ASSERT_TRUE(status.ok()) << Describe(status);
  ExpectSameLogits(Float32s(response.logits()), second, "after");
  EXPECT_EQ(response.num_tokens(), 10);
  EXPECT_TRUE(Release(stub(), p.session_id()).ok());
  EXPECT_TRUE(Release(stub(), reference).ok());
}

// ---------------------------------------------------------------------------
// The limits server: 2 sessions, a 1 MiB KV pool, 8 tokens per step.

constexpr int64_t kLimitsKvCacheMb = 1;

class ModelServerLimitsTest
    : public testing::SuiteServerTest<ModelServerLimitsTest, ModelServerTestBase> {
 public:
  static void StartSuiteServer(ServerState* state) {
    StartModelServer(state, {"--max_sessions", "2", "--kv_cache_mb",
                             std::to_string(kLimitsKvCacheMb), "--max_batch_tokens", "8"});
  }

 protected:
  void SetUp() override {
    ModelServerTestBase::SetUp();
    if (HasFatalFailure()) return;
    for (const v1::SessionInfo& s : ListSessions(stub())) Release(stub(), s.session_id());
  }

  // Tokens the KV pool holds.
  static int64_t PoolTokens() { return kLimitsKvCacheMb * (1 << 20) / BlockBytes() * 16; }
};

// At the session limit a new session (Prefill or Fork) takes the place of
// the least recently used idle one, which is gone (NOT_FOUND); a Fork keeps
// its parent. (RESOURCE_EXHAUSTED only when every session is busy:
// limits_drain_test and the engine's tests.)
TEST_F(ModelServerLimitsTest, SessionLimitEvictsTheLeastRecentlyUsedIdleSession) {
  const v1::PrefillResponse a = MustPrefill(stub(), "", {1});
  const v1::PrefillResponse b = MustPrefill(stub(), "", {2});
  MustDecode(stub(), a.session_id(), 4);  // b is now the least recently used
  const v1::PrefillResponse c = MustPrefill(stub(), "", {3});
  EXPECT_EQ(c.num_tokens(), 1);
  v1::DecodeTokenResponse response;
  grpc::Status status = Decode(stub(), b.session_id(), 5, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND) << Describe(status);
  std::string child;
  status = Fork(stub(), c.session_id(), &child);
  ASSERT_TRUE(status.ok()) << Describe(status);
  std::vector<std::string> held;
  for (const v1::SessionInfo& s : ListSessions(stub())) held.push_back(s.session_id());
  std::sort(held.begin(), held.end());
  std::vector<std::string> expected = {c.session_id(), child};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(held, expected);
  EXPECT_TRUE(Release(stub(), c.session_id()).ok());
  EXPECT_TRUE(Release(stub(), child).ok());
}

TEST_F(ModelServerLimitsTest, MoreThanTheKvPoolIsResourceExhausted) {
  ASSERT_LT(PoolTokens(), Spec().context);  // so that the pool, not the context, is the limit
  v1::PrefillResponse r;
  const grpc::Status status =
      Prefill(stub(), "", Tokens(30, static_cast<int>(PoolTokens()) + 1), &r);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << Describe(status);
  EXPECT_TRUE(ListSessions(stub()).empty());
  // Exactly the pool fits.
  const v1::PrefillResponse full =
      MustPrefill(stub(), "", Tokens(31, static_cast<int>(PoolTokens())),
                  Encoding(v1::LogitsOptions::LOGITS_TOP_N, 1));
  EXPECT_EQ(full.num_tokens(), PoolTokens());
  EXPECT_TRUE(Release(stub(), full.session_id()).ok());
}

TEST_F(ModelServerLimitsTest, SecondCallOnABusySessionIsAborted) {
  // A long prefill (8 tokens per step: many steps) keeps the session busy
  // while other calls on it arrive. Retried in case the prefill wins the race.
  const int64_t long_prompt = PoolTokens() - 8;
  bool saw_aborted = false;
  for (int attempt = 0; attempt < 10 && !saw_aborted; ++attempt) {
    const v1::PrefillResponse p = MustPrefill(stub(), "", {1});
    grpc::Status long_status;
    std::atomic<bool> done{false};
    std::thread prefill([&] {
      v1::PrefillResponse r;
      long_status = Prefill(stub(), p.session_id(), Tokens(32, static_cast<int>(long_prompt)), &r,
                            Encoding(v1::LogitsOptions::LOGITS_TOP_N, 1));
      done = true;
    });
    while (!done) {
      const std::optional<v1::SessionInfo> s = FindSession(stub(), p.session_id());
      if (s.has_value() && s->busy()) break;
    }
    if (!done) {
      v1::DecodeTokenResponse d;
      const grpc::Status decode = Decode(stub(), p.session_id(), 1, &d);
      const grpc::Status truncate = Truncate(stub(), p.session_id(), 0);
      std::string child;
      const grpc::Status fork = Fork(stub(), p.session_id(), &child);
      if (!done) {  // the prefill was still running through all three
        EXPECT_EQ(decode.error_code(), grpc::StatusCode::ABORTED) << Describe(decode);
        EXPECT_EQ(truncate.error_code(), grpc::StatusCode::ABORTED) << Describe(truncate);
        EXPECT_EQ(fork.error_code(), grpc::StatusCode::ABORTED) << Describe(fork);
        saw_aborted = true;
      }
      if (fork.ok()) Release(stub(), child);
    }
    prefill.join();
    EXPECT_TRUE(long_status.ok()) << Describe(long_status);
    EXPECT_TRUE(Release(stub(), p.session_id()).ok());
  }
  EXPECT_TRUE(saw_aborted) << "the long prefill always finished before the second call";
}

TEST_F(ModelServerLimitsTest, DeadlineStopsTheWorkAndLeavesTheSessionUsable) {
  // A prefill of many 8-token steps with a deadline that passes midway: the
  // server cancels it at the next step and keeps the chunks computed so far.
  const int64_t long_prompt = PoolTokens() - 8;
  const v1::PrefillResponse p = MustPrefill(stub(), "", {1});
  v1::PrefillRequest request;
  request.set_session_id(p.session_id());
  for (int32_t t : Tokens(33, static_cast<int>(long_prompt))) request.add_tokens(t);
  v1::PrefillResponse response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(10));
  const grpc::Status status = stub().Prefill(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << Describe(status);
  ASSERT_TRUE(WaitUntilIdle(stub(), p.session_id())) << "session lost or still busy";
  const int64_t n = FindSession(stub(), p.session_id())->num_tokens();
  EXPECT_GE(n, 1);
  EXPECT_LT(n, 1 + long_prompt) << "the cancelled prefill ran to the end";
  ASSERT_TRUE(Truncate(stub(), p.session_id(), 1).ok());
  int64_t after = 0;
  MustDecode(stub(), p.session_id(), 2, &after);
  EXPECT_EQ(after, 2);
  EXPECT_TRUE(Release(stub(), p.session_id()).ok());
}

// A server may listen on a Unix socket (a client in the same pod or host):
// its endpoint (the startup line) names the socket, and calls reach the
// service through it.
TEST(ModelServiceUnixSocketTest, ListensOnAUnixSocket) {
  // In /tmp: a socket path has at most 107 characters, and TMPDIR may be long.
  const std::string path = StrCat("/tmp/model_service_test.", getpid(), ".sock");
  std::filesystem::remove(path);
  ModelServiceImpl service;
  ServerOptions options;
  options.listen = "unix:" + path;
  auto runner = ServerRunner::Start(options, {&service});
  ASSERT_TRUE(runner.ok()) << runner.status().message();
  EXPECT_EQ((*runner)->endpoint(), "unix:" + path);
  auto channel = grpc::CreateChannel("unix:" + path, grpc::InsecureChannelCredentials());
  EXPECT_EQ(CheckHealth(channel, "", std::chrono::seconds(5)).serving_status, testing::kNotServing);
  v1::PrefillResponse pr;
  EXPECT_EQ(Prefill(*v1::Model::NewStub(channel), "", {1}, &pr).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  (*runner)->Shutdown(absl::ZeroDuration());
  std::filesystem::remove(path);
}

// ---------------------------------------------------------------------------
// The service in this process, before and after its engine is set (the
// loading phase of model_server is too short to catch with a small model).

TEST(ModelServiceLoadingTest, EveryCallIsUnavailableUntilTheEngineIsSet) {
  ModelServiceImpl service;
  ServerOptions options;
  auto runner = ServerRunner::Start(options, {&service});
  ASSERT_TRUE(runner.ok()) << runner.status().message();
  auto channel = grpc::CreateChannel(StrCat("127.0.0.1:", (*runner)->port()),
                                     grpc::InsecureChannelCredentials());
  EXPECT_EQ(CheckHealth(channel, "", std::chrono::seconds(5)).serving_status, testing::kNotServing);
  auto stub = v1::Model::NewStub(channel);
  constexpr auto kUnavailable = grpc::StatusCode::UNAVAILABLE;
  v1::PrefillResponse pr;
  v1::DecodeTokenResponse dr;
  std::string child;
  EXPECT_EQ(Prefill(*stub, "", {1}, &pr).error_code(), kUnavailable);
  EXPECT_EQ(Decode(*stub, "s", 1, &dr).error_code(), kUnavailable);
  EXPECT_EQ(Truncate(*stub, "s", 0).error_code(), kUnavailable);
  EXPECT_EQ(Fork(*stub, "s", &child).error_code(), kUnavailable);
  EXPECT_EQ(Release(*stub, "s").error_code(), kUnavailable);
  {
    v1::ModelInfo info;
    grpc::ClientContext context;
    EXPECT_EQ(stub->Info(&context, {}, &info).error_code(), kUnavailable);
  }
  {
    v1::ListSessionsResponse sessions;
    grpc::ClientContext context;
    EXPECT_EQ(stub->ListSessions(&context, {}, &sessions).error_code(), kUnavailable);
  }
  {
    grpc::ClientContext context;
    context.set_deadline(Deadline());
    auto stream = stub->DecodeStream(&context);
    v1::DecodeTokenResponse response;
    EXPECT_FALSE(stream->Read(&response));
    EXPECT_EQ(stream->Finish().error_code(), kUnavailable);
  }

  // Loaded: served.
  model::ModelOptions model_options;
  model_options.kv_blocks = 64;
  auto model = model::testing::LoadRandomModel(Spec(), model_options, /*threads=*/1);
  ASSERT_TRUE(model.ok()) << model.status().message();
  auto engine = engine::Engine::Create(std::move(*model), engine::EngineOptions());
  ASSERT_TRUE(engine.ok()) << engine.status().message();
  service.SetEngine(engine->get(), ModelServiceOptions());
  (*runner)->SetServing(true);
  EXPECT_EQ(CheckHealth(channel, "llm.v1.Model", std::chrono::seconds(5)).serving_status,
            testing::kServing);
  const grpc::Status status = Prefill(*stub, "", {1, 2, 3}, &pr);
  ASSERT_TRUE(status.ok()) << Describe(status);
  EXPECT_EQ(pr.num_tokens(), 3);
  EXPECT_EQ(pr.logits().float32().size(), 4u * kVocab);
  // The engine must outlive every call: stop the server first.
  (*runner)->Shutdown(absl::Seconds(1));
}

// ---------------------------------------------------------------------------
// Process life cycle, with a server of its own per test.

TEST(ModelServerProcessTest, SigtermWithAnOpenStreamExitsZero) {
  ASSERT_EQ(*model_error, "");
  ServerState state;
  StartModelServer(&state, {"--drain-seconds", "1"});
  ASSERT_NE(state.stub, nullptr) << state.error;
  const v1::PrefillResponse p = MustPrefill(*state.stub, "", Tokens(40, 4));
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  auto stream = state.stub->DecodeStream(&context);
  v1::DecodeTokenRequest request;
  request.set_session_id(p.session_id());
  request.set_token(1);
  ASSERT_TRUE(stream->Write(request));
  v1::DecodeTokenResponse response;
  ASSERT_TRUE(stream->Read(&response));
  EXPECT_EQ(response.num_tokens(), 5);
  const auto start = testing::Clock::now();
  const std::optional<int> exit_status = state.process->Terminate(std::chrono::seconds(15));
  ASSERT_TRUE(exit_status.has_value()) << "did not exit within 15 s of SIGTERM";
  EXPECT_TRUE(testing::ExitedZero(*exit_status)) << testing::DescribeWaitStatus(*exit_status);
  EXPECT_LT(testing::Clock::now() - start, std::chrono::seconds(10));
  while (stream->Read(&response)) {
  }
  EXPECT_FALSE(stream->Finish().ok());
}

TEST(ModelServerProcessTest, SigintExitsZero) {
  ASSERT_EQ(*model_error, "");
  ServerState state;
  StartModelServer(&state, {});
  ASSERT_NE(state.stub, nullptr) << state.error;
  MustPrefill(*state.stub, "", {1, 2, 3});
  // An idle open connection holds the shutdown for --drain_seconds (gRPC
  // waits for the client to close it): close ours.
  state.stub.reset();
  state.channel.reset();
  const std::optional<int> status = state.process->Terminate(std::chrono::seconds(15), SIGINT);
  ASSERT_TRUE(status.has_value()) << "did not exit within 15 s of SIGINT";
  EXPECT_TRUE(testing::ExitedZero(*status)) << testing::DescribeWaitStatus(*status);
}

// Where each thread of process `pid` may run: (name, CPU set).
std::vector<std::pair<std::string, cpu_set_t>> ThreadAffinities(pid_t pid) {
  std::vector<std::pair<std::string, cpu_set_t>> threads;
  for (const auto& entry : std::filesystem::directory_iterator(StrCat("/proc/", pid, "/task"))) {
    std::string name;
    std::getline(std::ifstream(entry.path() / "comm"), name);
    cpu_set_t set;
    if (sched_getaffinity(std::stoi(entry.path().filename()), sizeof(set), &set) == 0) {
      threads.emplace_back(name, set);
    }
  }
  return threads;
}

// --pin_threads: the forward pass's thread (llm-step, with --threads 1) alone
// on the first CPU the server may use and every other thread on the others,
// with no delay; after calls of every kind, still no other thread confined to
// that CPU (gRPC may start one from a call the step loop's callbacks make:
// such a thread may run anywhere, compute_affinity.h).
TEST(ModelServerProcessTest, PinThreadsGivesTheComputeThreadsTheirOwnCpus) {
  ASSERT_EQ(*model_error, "");
  cpu_set_t allowed;
  ASSERT_EQ(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  if (CPU_COUNT(&allowed) < 2) GTEST_SKIP() << "one CPU: nothing to pin apart";
  int first = 0;
  while (!CPU_ISSET(first, &allowed)) ++first;
  ServerState state;
  StartModelServer(&state, {"--threads", "1", "--pin_threads"});
  ASSERT_NE(state.stub, nullptr) << state.error;
  // `strict`: every other thread off the first CPU; else only not confined
  // to it.
  auto check = [&](const std::string& when, bool strict) {
    std::string misplaced;
    int compute = 0, others = 0;
    for (const auto& [name, set] : ThreadAffinities(state.process->pid())) {
      if (name == "llm-step") {
        ++compute;
        if (CPU_COUNT(&set) != 1 || !CPU_ISSET(first, &set)) misplaced += " " + name;
      } else {
        ++others;
        const bool confined = CPU_COUNT(&set) == 1 && CPU_ISSET(first, &set);
        if (strict ? CPU_ISSET(first, &set) : confined) misplaced += " " + name;
      }
    }
    EXPECT_EQ(misplaced, "") << "threads on the wrong CPUs " << when;
    EXPECT_EQ(compute, 1) << when;
    EXPECT_GT(others, 1) << when;
  };
  check("once serving", /*strict=*/true);
  const v1::PrefillResponse p = MustPrefill(*state.stub, "", {1, 2, 3});
  for (int32_t token : {4, 5, 6}) {
    v1::DecodeTokenResponse r;
    ASSERT_TRUE(Decode(*state.stub, p.session_id(), token, &r).ok());
  }
  // Many calls at once: gRPC's threads are busy when the step loop answers.
  std::vector<std::thread> callers;
  for (int i = 0; i < 8; ++i) {
    callers.emplace_back([&state, i] {
      const v1::PrefillResponse q = MustPrefill(*state.stub, "", {1, 2, 3, i + 4});
      std::string child;
      EXPECT_TRUE(Fork(*state.stub, q.session_id(), &child).ok());
      EXPECT_TRUE(Truncate(*state.stub, q.session_id(), 2).ok());
      EXPECT_TRUE(Release(*state.stub, child).ok());
    });
  }
  for (std::thread& t : callers) t.join();
  check("after calls", /*strict=*/false);
}

// --pin_threads needs a CPU left for the other threads: a usage error
// otherwise, before loading.
TEST(ModelServerProcessTest, PinThreadsWithoutACpuToSpareIsAUsageError) {
  ASSERT_EQ(*model_error, "");
  cpu_set_t allowed;
  ASSERT_EQ(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  for (const std::string& threads : {std::string("0"), std::to_string(CPU_COUNT(&allowed))}) {
    std::string error;
    auto server = ServerProcess::Start(
        "model_server", {"--model", *model_path, "--threads", threads, "--pin_threads"}, &error);
    EXPECT_EQ(server, nullptr) << "--threads " << threads;
    EXPECT_THAT(error, HasSubstr("exit status 2")) << "--threads " << threads;
  }
}

// --help names the families served and both backends (it used to say "Llama
// family" and "on the CPU").
TEST(ModelServerProcessTest, HelpNamesTheFamiliesAndBackends) {
  FILE* pipe = popen(StrCat(testing::BinPath("model_server"), " --help 2>&1").c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string help;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), pipe)) help.append(buf, n);
  EXPECT_EQ(pclose(pipe), 0);
  for (const char* family : {"llama", "qwen2", "qwen3", "gemma3", "phi3"}) {
    EXPECT_THAT(help, HasSubstr(family));
  }
  EXPECT_THAT(help, HasSubstr("CPU or CUDA backend"));
  EXPECT_THAT(help, Not(HasSubstr("Llama family")));
}

TEST(ModelServerProcessTest, BadModelExitsNonZeroWithoutPortLine) {
  std::string error;
  auto server =
      ServerProcess::Start("model_server", {"--model", "/nonexistent/model.gguf"}, &error);
  EXPECT_EQ(server, nullptr);
  EXPECT_THAT(error, HasSubstr("no port line"));
  EXPECT_THAT(error, HasSubstr("exit status 1"));

  // Not a GGUF file.
  const std::string junk = StrCat(::testing::TempDir(), "model_service_test_junk_", getpid());
  {
    std::ofstream out(junk, std::ios::binary);
    out << "this is not a gguf file";
  }
  server = ServerProcess::Start("model_server", {"--model", junk}, &error);
  EXPECT_EQ(server, nullptr);
  EXPECT_THAT(error, HasSubstr("exit status 1"));
  std::filesystem::remove(junk);

  // No --model at all: a usage error.
  server = ServerProcess::Start("model_server", {}, &error);
  EXPECT_EQ(server, nullptr);
  EXPECT_THAT(error, HasSubstr("exit status 2"));
}

}  // namespace
}  // namespace llm
