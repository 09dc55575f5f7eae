// Integration tests of the operations features of both servers (metrics over
// HTTP; see docs/operations.md): the real binaries, started as child
// processes on port 0, with their stdout port lines read here.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/grpc/security.h"
#include "common/strings.h"
#include "common/test_paths.h"
#include "llm/v1/model.grpc.pb.h"
#include "llm/v1/tokenizer.grpc.pb.h"
#include "model_svc/testing/random_model.h"
#include "tests/ops_server.h"
#include "tests/server_process.h"
#include "tests/test_certificates.h"

namespace llm {
namespace {

using testing::Clock;
using testing::Describe;
using ::testing::HasSubstr;
using testing::HttpGet;
using ::testing::Not;
using testing::OpsServer;
using testing::Sample;

std::string MptVocab() {
  return testing::SharedDir() + "/conformance/llama-vocab/ggml-vocab-mpt.gguf";
}

TEST(MetricsTest, ModelServerReportsLatenciesTokensSessionsAndRejections) {
  const std::string model = testing::WriteRandomModel("ops-test", 11);
  ASSERT_FALSE(model.empty());
  std::string error;
  auto server = OpsServer::Start(
      "model_server", {"--model", model, "--kv_cache_mb", "8", "--metrics_listen", "127.0.0.1:0"},
      true, &error);
  ASSERT_NE(server, nullptr) << error;
  auto channel = grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials());
  ASSERT_TRUE(testing::WaitUntilServing(channel, std::chrono::seconds(60), &error)) << error;
  auto stub = v1::Model::NewStub(channel);

  const std::string before = HttpGet(server->metrics_port(), "/metrics");
  ASSERT_THAT(before, HasSubstr("200 OK"));
  for (const char* name :
       {"llm_time_to_first_token_seconds", "llm_inter_token_latency_seconds",
        "llm_prompt_tokens_total", "llm_generation_tokens_total", "llm_num_requests_running",
        "llm_num_requests_waiting", "llm_kv_cache_usage_perc", "llm_sessions",
        "llm_sessions_evicted_total", "llm_sessions_expired_total", "llm_session_reuse_total",
        "llm_prefix_cache_queries_total", "llm_prefix_cache_hits_total",
        "llm_kv_cache_cached_blocks", "llm_speculative_proposed_tokens_total",
        "llm_speculative_rolled_back_tokens_total"}) {
    EXPECT_THAT(before, HasSubstr(StrCat("# TYPE ", name, " "))) << name;
  }
  EXPECT_EQ(Sample(before, "llm_sessions"), 0.0);
  EXPECT_EQ(Sample(before, "llm_kv_cache_usage_perc"), 0.0);

  // A new session of 5 tokens, 2 more prompt tokens on it, 3 decodes, 2
  // stream steps, and a call on an unknown session.
  std::string session;
  {
    grpc::ClientContext context;
    v1::PrefillRequest request;
    for (int t : {1, 2, 3, 4, 5}) request.add_tokens(t);
    request.mutable_logits()->set_encoding(v1::LogitsOptions::LOGITS_TOP_N);
    request.mutable_logits()->set_top_n(1);
    v1::PrefillResponse response;
    const grpc::Status status = stub->Prefill(&context, request, &response);
    ASSERT_TRUE(status.ok()) << Describe(status);
    session = response.session_id();
  }
  {
    grpc::ClientContext context;
    v1::PrefillRequest request;
    request.set_session_id(session);
    request.add_tokens(6);
    request.add_tokens(7);
    request.mutable_logits()->set_encoding(v1::LogitsOptions::LOGITS_TOP_N);
    request.mutable_logits()->set_top_n(1);
    v1::PrefillResponse response;
    const grpc::Status status = stub->Prefill(&context, request, &response);
    ASSERT_TRUE(status.ok()) << Describe(status);
  }
  for (int i = 0; i < 3; ++i) {
    grpc::ClientContext context;
    v1::DecodeTokenRequest request;
    request.set_session_id(session);
    request.set_token(8 + i);
    request.mutable_logits()->set_encoding(v1::LogitsOptions::LOGITS_TOP_N);
    request.mutable_logits()->set_top_n(1);
    v1::DecodeTokenResponse response;
    const grpc::Status status = stub->Decode(&context, request, &response);
    ASSERT_TRUE(status.ok()) << Describe(status);
  }
  {  // Two steps on a stream.
    grpc::ClientContext context;
    auto stream = stub->DecodeStream(&context);
    for (int t : {11, 12}) {
      v1::DecodeTokenRequest request;
      request.set_session_id(session);
      request.set_token(t);
      request.mutable_logits()->set_encoding(v1::LogitsOptions::LOGITS_TOP_N);
      request.mutable_logits()->set_top_n(1);
      ASSERT_TRUE(stream->Write(request));
      v1::DecodeTokenResponse response;
      ASSERT_TRUE(stream->Read(&response));
    }
    stream->WritesDone();
    const grpc::Status status = stream->Finish();
    ASSERT_TRUE(status.ok()) << Describe(status);
  }
  {
    grpc::ClientContext context;
    v1::ReleaseRequest request;
    request.set_session_id("no-such-session");
    v1::ReleaseResponse response;
    EXPECT_EQ(stub->Release(&context, request, &response).error_code(),
              grpc::StatusCode::NOT_FOUND);
  }

  const std::string after = HttpGet(server->metrics_port(), "/metrics");
  EXPECT_EQ(Sample(after, "llm_time_to_first_token_seconds_count"), 2.0);
  EXPECT_EQ(Sample(after, "llm_inter_token_latency_seconds_count"), 5.0);
  EXPECT_EQ(Sample(after, "llm_prompt_tokens_total"), 7.0);
  EXPECT_EQ(Sample(after, "llm_generation_tokens_total"), 5.0);
  EXPECT_EQ(Sample(after, "llm_session_reuse_total"), 1.0);
  // The new session's Prefill looked the cache up (5 tokens; the second
  // Prefill's session ended inside a block); 5 tokens fill no block.
  EXPECT_EQ(Sample(after, "llm_prefix_cache_queries_total"), 5.0);
  EXPECT_EQ(Sample(after, "llm_prefix_cache_hits_total"), 0.0);
  EXPECT_EQ(Sample(after, "llm_sessions"), 1.0);
  EXPECT_GT(Sample(after, "llm_kv_cache_usage_perc").value_or(0), 0.0);
  // A labelled family appears with its first sample.
  EXPECT_THAT(after, HasSubstr("# TYPE llm_requests_rejected_total counter"));
  EXPECT_EQ(Sample(after, "llm_requests_rejected_total{code=\"NOT_FOUND\"}"), 1.0);

  const std::optional<int> status = server->Terminate();
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(testing::ExitedZero(*status)) << testing::DescribeWaitStatus(*status);
  std::filesystem::remove(model);
}

// ---------------------------------------------------------------------------
// TLS, mutual TLS and bearer tokens.

// A CA, a server certificate for 127.0.0.1 and localhost, and a client
// certificate, made with openssl in a temporary directory.
class Certificates : public ::testing::Environment {
 public:
  static std::string dir;
  static std::string error;
  void SetUp() override {
    dir = StrCat(::testing::TempDir(), "ops_test_certs_", getpid());
    error = testing::MakeTestCertificates(dir);
    if (!error.empty()) return;
    std::ofstream(dir + "/token") << "s3cret-token\n";
    std::ofstream(dir + "/wrong_token") << "other-token";
  }
  void TearDown() override {
    if (!error.empty()) return;  // keep the log
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  }
  static std::string Path(const std::string& name) { return dir + "/" + name; }
};
std::string Certificates::dir;
std::string Certificates::error;
::testing::Environment* const certificates_env =
    ::testing::AddGlobalTestEnvironment(new Certificates);

// A channel to `server` with TLS files (verifying the server as "localhost")
// and a token ("" for none).
std::shared_ptr<grpc::Channel> Channel(const OpsServer& server, const TlsFiles& files,
                                       const std::string& token) {
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> creds = MakeChannelCredentials(files);
  EXPECT_TRUE(creds.ok()) << creds.status();
  grpc::ChannelArguments args;
  if (!files.ca.empty()) args.SetSslTargetNameOverride("localhost");
  return CreateAuthChannel(server.address(), *creds, args, token);
}

// Tokenizer Info over `channel`: the call's status.
grpc::Status TokenizerInfo(const std::shared_ptr<grpc::Channel>& channel) {
  auto stub = v1::Tokenizer::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::InfoResponse info;
  return stub->Info(&context, v1::InfoRequest(), &info);
}

class SecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(Certificates::error.empty()) << Certificates::error;
    if (!std::filesystem::exists(MptVocab())) GTEST_SKIP() << "missing " << MptVocab();
  }
  std::unique_ptr<OpsServer> StartTokenizer(const std::vector<std::string>& extra) {
    std::vector<std::string> flags = {"--vocab", MptVocab()};
    flags.insert(flags.end(), extra.begin(), extra.end());
    std::string error;
    auto server = OpsServer::Start("tokenizer_server", flags, false, &error);
    EXPECT_NE(server, nullptr) << error;
    return server;
  }
  static std::string P(const std::string& name) { return Certificates::Path(name); }
};

TEST_F(SecurityTest, TlsServerRefusesPlaintextAndServesTls) {
  auto server = StartTokenizer({"--tls_cert", P("server.pem"), "--tls_key", P("server.key")});
  ASSERT_NE(server, nullptr);
  EXPECT_FALSE(TokenizerInfo(Channel(*server, {}, "")).ok());
  const grpc::Status tls = TokenizerInfo(Channel(*server, {"", "", P("ca.pem")}, ""));
  EXPECT_TRUE(tls.ok()) << Describe(tls);
  // A client that trusts another CA (the client certificate is no CA) fails.
  EXPECT_FALSE(TokenizerInfo(Channel(*server, {"", "", P("client.pem")}, "")).ok());
}

TEST_F(SecurityTest, MutualTlsRequiresAClientCertificate) {
  auto server = StartTokenizer(
      {"--tls_cert", P("server.pem"), "--tls_key", P("server.key"), "--tls_ca", P("ca.pem")});
  ASSERT_NE(server, nullptr);
  EXPECT_FALSE(TokenizerInfo(Channel(*server, {"", "", P("ca.pem")}, "")).ok());
  const grpc::Status mtls =
      TokenizerInfo(Channel(*server, {P("client.pem"), P("client.key"), P("ca.pem")}, ""));
  EXPECT_TRUE(mtls.ok()) << Describe(mtls);
  // A self-signed client certificate is refused.
  EXPECT_FALSE(
      TokenizerInfo(Channel(*server, {P("rogue.pem"), P("rogue.key"), P("ca.pem")}, "")).ok());
}

TEST_F(SecurityTest, TokenizerBearerToken) {
  auto server = StartTokenizer({"--auth_token_file", P("token")});
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(TokenizerInfo(Channel(*server, {}, "")).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(TokenizerInfo(Channel(*server, {}, "other-token")).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  const grpc::Status right = TokenizerInfo(Channel(*server, {}, "s3cret-token"));
  EXPECT_TRUE(right.ok()) << Describe(right);
  // Streams are checked too.
  {
    auto stub = v1::Tokenizer::NewStub(Channel(*server, {}, ""));
    grpc::ClientContext context;
    auto stream = stub->DecodeStream(&context);
    v1::DecodeStreamResponse response;
    EXPECT_FALSE(stream->Read(&response));
    EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  // Health needs no token.
  const testing::HealthResult health =
      testing::CheckHealth(Channel(*server, {}, ""), "", std::chrono::seconds(5));
  ASSERT_TRUE(health.status.ok()) << Describe(health.status);
  EXPECT_EQ(health.serving_status, testing::kServing);
}

TEST_F(SecurityTest, ModelServerWithTlsAndToken) {
  const std::string model = testing::WriteRandomModel("ops-test", 11);
  ASSERT_FALSE(model.empty());
  std::string error;
  auto server =
      OpsServer::Start("model_server",
                       {"--model", model, "--kv_cache_mb", "8", "--tls_cert", P("server.pem"),
                        "--tls_key", P("server.key"), "--auth_token_file", P("token")},
                       false, &error);
  ASSERT_NE(server, nullptr) << error;
  const TlsFiles tls = {"", "", P("ca.pem")};
  // Health: over TLS, without a token.
  ASSERT_TRUE(
      testing::WaitUntilServing(Channel(*server, tls, ""), std::chrono::seconds(60), &error))
      << error;
  auto info = [](const std::shared_ptr<grpc::Channel>& channel) {
    auto stub = v1::Model::NewStub(channel);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::ModelInfo response;
    return stub->Info(&context, v1::ModelInfoRequest(), &response);
  };
  EXPECT_EQ(info(Channel(*server, tls, "")).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(info(Channel(*server, tls, "other-token")).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  const grpc::Status right = info(Channel(*server, tls, "s3cret-token"));
  EXPECT_TRUE(right.ok()) << Describe(right);
  EXPECT_FALSE(info(Channel(*server, {}, "s3cret-token")).ok());  // plaintext
  {
    auto stub = v1::Model::NewStub(Channel(*server, tls, "wrong"));
    grpc::ClientContext context;
    auto stream = stub->DecodeStream(&context);
    v1::DecodeTokenResponse response;
    EXPECT_FALSE(stream->Read(&response));
    EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  std::filesystem::remove(model);
}

// Runs `llm` with `args` and stdin `input` through the shell; its exit status
// and stdout.
std::pair<int, std::string> RunLlm(const std::vector<std::string>& args, const std::string& input) {
  const std::string base = StrCat(::testing::TempDir(), "ops_test_llm_", getpid());
  {
    std::ofstream in(base + ".in");
    in << input;
  }
  std::string command = StrCat("'", testing::BinPath("llm"), "'");
  for (const std::string& a : args) command += StrCat(" '", a, "'");
  command += StrCat(" <'", base, ".in' >'", base, ".out' 2>'", base, ".err'");
  const int status = std::system(command.c_str());
  std::ifstream out(base + ".out");
  std::string text((std::istreambuf_iterator<char>(out)), std::istreambuf_iterator<char>());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, text};
}

TEST_F(SecurityTest, LlmCliTokenizesOverMutualTlsWithAToken) {
  auto server = StartTokenizer({"--tls_cert", P("server.pem"), "--tls_key", P("server.key"),
                                "--tls_ca", P("ca.pem"), "--auth_token_file", P("token")});
  ASSERT_NE(server, nullptr);
  const std::vector<std::string> tls = {"--tls_ca",          P("ca.pem"), "--tls_cert",
                                        P("client.pem"),     "--tls_key", P("client.key"),
                                        "--tls_server_name", "localhost"};
  std::vector<std::string> args = {"tokenize", "--server", server->address()};
  args.insert(args.end(), tls.begin(), tls.end());
  std::vector<std::string> with_token = args;
  with_token.insert(with_token.end(), {"--auth_token_file", P("token")});
  const auto [ok_status, ok_out] = RunLlm(with_token, "{\"text\": \"hello world\"}\n");
  EXPECT_EQ(ok_status, 0) << ok_out;
  EXPECT_THAT(ok_out, HasSubstr("\"ids\""));
  const auto [no_token_status, no_token_out] = RunLlm(args, "{\"text\": \"hello\"}\n");
  EXPECT_NE(no_token_status, 0) << no_token_out;
}

TEST_F(SecurityTest, LlmGenerateAndHealthOverMutualTlsWithAToken) {
  const std::string model = testing::SourceDir() + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!std::filesystem::exists(model)) GTEST_SKIP() << "missing " << model;
  const std::vector<std::string> server_tls = {"--tls_cert",        P("server.pem"), "--tls_key",
                                               P("server.key"),     "--tls_ca",      P("ca.pem"),
                                               "--auth_token_file", P("token")};
  std::vector<std::string> tflags = {"--vocab", model};
  tflags.insert(tflags.end(), server_tls.begin(), server_tls.end());
  std::vector<std::string> mflags = {"--model", model, "--kv_cache_mb", "64"};
  mflags.insert(mflags.end(), server_tls.begin(), server_tls.end());
  std::string error;
  auto tokenizer = OpsServer::Start("tokenizer_server", tflags, false, &error);
  ASSERT_NE(tokenizer, nullptr) << error;
  auto model_server = OpsServer::Start("model_server", mflags, false, &error);
  ASSERT_NE(model_server, nullptr) << error;
  const std::vector<std::string> client_tls = {
      "--tokenizer", tokenizer->address(), "--model",           model_server->address(),
      "--tls_ca",    P("ca.pem"),          "--tls_cert",        P("client.pem"),
      "--tls_key",   P("client.key"),      "--tls_server_name", "localhost"};
  std::vector<std::string> health = {"health", "--wait", "60"};
  health.insert(health.end(), client_tls.begin(), client_tls.end());
  const auto [health_status, health_out] = RunLlm(health, "");
  ASSERT_EQ(health_status, 0) << health_out;
  EXPECT_THAT(health_out, HasSubstr("model " + model_server->address() + ": SERVING"));

  std::vector<std::string> generate = {"generate", "--prompt",      "Hi", "--max-tokens",
                                       "3",        "--temperature", "0",  "--json"};
  generate.insert(generate.end(), client_tls.begin(), client_tls.end());
  const auto [no_token_status, no_token_out] = RunLlm(generate, "");
  EXPECT_NE(no_token_status, 0) << no_token_out;
  generate.insert(generate.end(), {"--auth_token_file", P("token")});
  const auto [status, out] = RunLlm(generate, "");
  EXPECT_EQ(status, 0) << out;
  EXPECT_THAT(out, HasSubstr("\"stop_reason\""));
}

// A malformed --model is a usage error (2) in every subcommand; health with
// a name that resolves to nothing still checks the tokenizer, and fails (1).
TEST(ModelTargetFlagTest, MalformedTargetIsAUsageErrorEverywhere) {
  for (const char* command : {"generate", "health"}) {
    const auto [status, out] = RunLlm({command, "--model", "dns:///no-port", "--tokenizer",
                                       "127.0.0.1:1", "--prompt", "x", "--wait", "0"},
                                      "");
    EXPECT_EQ(status, 2) << command << ": " << out;
  }
  const auto [status, out] = RunLlm({"health", "--model", "dns:///no-such-host.invalid:50052",
                                     "--tokenizer", "127.0.0.1:1", "--wait", "1"},
                                    "");
  EXPECT_EQ(status, 1) << out;
  // Nothing answered at either address: unreachable, not "not serving".
  EXPECT_THAT(out, HasSubstr("model dns:///no-such-host.invalid:50052: UNREACHABLE ("));
  EXPECT_THAT(out, HasSubstr("tokenizer 127.0.0.1:1: UNREACHABLE ("));
  EXPECT_THAT(out, Not(HasSubstr("NOT SERVING")));
  EXPECT_THAT(out, Not(HasSubstr("is not serving")));
}

TEST_F(SecurityTest, BadSecurityFlagsAreUsageErrors) {
  for (const std::vector<std::string>& flags :
       std::vector<std::vector<std::string>>{{"--tls_cert", P("server.pem")},
                                             {"--tls_ca", P("ca.pem")},
                                             {"--auth_token_file", "/nonexistent/token"}}) {
    std::vector<std::string> argv = {testing::BinPath("tokenizer_server"), "--vocab", MptVocab(),
                                     "--listen", "127.0.0.1:0"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    std::string error;
    const pid_t pid = testing::Spawn(argv, -1, -1, &error);
    ASSERT_GT(pid, 0) << error;
    const std::optional<int> status = testing::WaitForExit(pid, std::chrono::seconds(30));
    ASSERT_TRUE(status.has_value());
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 2)
        << flags[0] << ": " << testing::DescribeWaitStatus(*status);
  }
}

// ---------------------------------------------------------------------------
// Request logs.

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST(RequestLogTest, ModelServerLogsOneLinePerCall) {
  const std::string model = testing::WriteRandomModel("ops-test", 11);
  ASSERT_FALSE(model.empty());
  const std::string log_path = StrCat(::testing::TempDir(), "ops_test_model_log_", getpid());
  std::string error;
  auto server = OpsServer::Start("model_server", {"--model", model, "--kv_cache_mb", "8"}, false,
                                 &error, log_path);
  ASSERT_NE(server, nullptr) << error;
  auto channel = grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials());
  ASSERT_TRUE(testing::WaitUntilServing(channel, std::chrono::seconds(60), &error)) << error;
  auto stub = v1::Model::NewStub(channel);
  std::string session;
  {
    grpc::ClientContext context;
    v1::PrefillRequest request;
    for (int t : {1, 2, 3, 4, 5}) request.add_tokens(t);
    v1::PrefillResponse response;
    ASSERT_TRUE(stub->Prefill(&context, request, &response).ok());
    session = response.session_id();
  }
  {
    grpc::ClientContext context;
    v1::ReleaseRequest request;
    request.set_session_id("no-such-session");
    v1::ReleaseResponse response;
    EXPECT_FALSE(stub->Release(&context, request, &response).ok());
  }
  ASSERT_TRUE(server->Terminate().has_value());
  const std::string log = ReadAll(log_path);
  // The start-up lines stay.
  EXPECT_THAT(log, HasSubstr("model_server: loaded random-llama-ops-test"));
  EXPECT_THAT(log, ::testing::ContainsRegex(
                       StrCat("level=info service=model method=Prefill session=", session,
                              " tokens=5 duration_ms=[0-9.]+ status=OK\n")));
  EXPECT_THAT(log, ::testing::ContainsRegex(
                       "level=warning service=model method=Release session=no-such-session "
                       "tokens=0 duration_ms=[0-9.]+ status=NOT_FOUND msg=\""));
  std::filesystem::remove(log_path);
  std::filesystem::remove(model);
}

TEST(RequestLogTest, TokenizerLogLevelFilters) {
  if (!std::filesystem::exists(MptVocab())) GTEST_SKIP() << "missing " << MptVocab();
  for (const char* level : {"info", "error"}) {
    const std::string log_path =
        StrCat(::testing::TempDir(), "ops_test_tokenizer_log_", getpid(), "_", level);
    std::string error;
    auto server = OpsServer::Start(
        "tokenizer_server", {"--vocab", MptVocab(), "--log_level", level}, false, &error, log_path);
    ASSERT_NE(server, nullptr) << error;
    auto stub = v1::Tokenizer::NewStub(
        grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    v1::EncodeRequest request;
    request.set_text("hello world");
    v1::EncodeResponse response;
    ASSERT_TRUE(stub->Encode(&context, request, &response).ok());
    ASSERT_TRUE(server->Terminate().has_value());
    const std::string log = ReadAll(log_path);
    EXPECT_THAT(log, HasSubstr("tokenizer_server: loaded "));  // start-up lines stay
    if (std::string(level) == "info") {
      EXPECT_THAT(log, ::testing::ContainsRegex(
                           StrCat("level=info service=tokenizer method=Encode tokens=",
                                  response.ids_size(), " duration_ms=[0-9.]+ status=OK")));
    } else {
      EXPECT_THAT(log, ::testing::Not(HasSubstr("method=Encode")));
    }
    std::filesystem::remove(log_path);
  }
  // A bad level is a usage error.
  std::string error;
  std::vector<std::string> argv = {testing::BinPath("tokenizer_server"), "--vocab", MptVocab(),
                                   "--log_level", "loud"};
  const pid_t pid = testing::Spawn(argv, -1, -1, &error);
  ASSERT_GT(pid, 0) << error;
  const std::optional<int> status = testing::WaitForExit(pid, std::chrono::seconds(30));
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 2);
}

// An open TCP connection that sends nothing to 127.0.0.1:`port`; -1 on failure.
int IdleConnection(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) return fd;
  if (fd >= 0) close(fd);
  return -1;
}

// Idle TCP connections to the metrics port (a port scanner, a TCP liveness
// check) do not stall a scrape: with one HTTP worker, one idle connection
// held /metrics until civetweb's 30 s request timeout closed it. The scrape
// must be answered while the idle connections are still open.
TEST(MetricsTest, IdleConnectionsDoNotBlockAScrape) {
  if (!std::filesystem::exists(MptVocab())) GTEST_SKIP() << "missing " << MptVocab();
  std::string error;
  auto server = OpsServer::Start(
      "tokenizer_server", {"--vocab", MptVocab(), "--metrics_listen", "127.0.0.1:0"}, true, &error);
  ASSERT_NE(server, nullptr) << error;
  const int idle[2] = {IdleConnection(server->metrics_port()),
                       IdleConnection(server->metrics_port())};
  ASSERT_GE(idle[0], 0);
  ASSERT_GE(idle[1], 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // let the server take them
  const std::string scrape = HttpGet(server->metrics_port(), "/metrics");
  EXPECT_THAT(scrape, HasSubstr("200 OK"));
  for (const int fd : idle) {
    // Still open: nothing to read, no hang-up (a closed one reads as EOF).
    pollfd p{fd, POLLIN, 0};
    EXPECT_EQ(poll(&p, 1, 0), 0) << "the idle connection was closed before the scrape ended";
    close(fd);
  }
}

// A server whose address is taken (here by the other service) exits with
// status 1 and says so. It used to crash with SIGSEGV on a port bound without
// SO_REUSEPORT, and to start and share the port with a server of this project
// (gRPC's default SO_REUSEPORT), so that clients got either server's answers.
TEST(ServerAddressTest, ServerOnABusyAddressExitsWithAClearError) {
  if (!std::filesystem::exists(MptVocab())) GTEST_SKIP() << "missing " << MptVocab();
  const std::string model = testing::WriteRandomModel("ops-test-busy-port", 12);
  ASSERT_FALSE(model.empty());
  std::string error;
  auto first = OpsServer::Start("tokenizer_server", {"--vocab", MptVocab()}, false, &error);
  ASSERT_NE(first, nullptr) << error;
  const std::string address = first->address();
  const std::vector<std::vector<std::string>> second_servers = {
      {testing::BinPath("tokenizer_server"), "--vocab", MptVocab(), "--listen", address},
      {testing::BinPath("model_server"), "--model", model, "--kv_cache_mb", "8", "--listen",
       address},
      {testing::BinPath("tokenizer_server"), "--vocab", MptVocab(), "--listen", "999.1.1.1:5"},
  };
  for (const std::vector<std::string>& argv : second_servers) {
    SCOPED_TRACE(StrCat(argv[0], " --listen ", argv.back()));
    const std::string err_path =
        StrCat(::testing::TempDir(), "ops_test_busy_port_", getpid(), ".err");
    const int err_file = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ASSERT_GE(err_file, 0);
    const int saved_stderr = dup(STDERR_FILENO);
    dup2(err_file, STDERR_FILENO);
    close(err_file);
    const pid_t pid = testing::Spawn(argv, -1, -1, &error);
    dup2(saved_stderr, STDERR_FILENO);
    close(saved_stderr);
    ASSERT_GT(pid, 0) << error;
    const std::optional<int> status = testing::WaitForExit(pid, std::chrono::seconds(60));
    ASSERT_TRUE(status.has_value()) << "still running: it shares the address";
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 1)
        << testing::DescribeWaitStatus(*status);
    EXPECT_THAT(ReadAll(err_path), HasSubstr("cannot listen on " + argv.back()));
    std::filesystem::remove(err_path);
  }
  // The first server still answers alone.
  auto stub =
      v1::Tokenizer::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  v1::EncodeRequest request;
  request.set_text("hello");
  v1::EncodeResponse response;
  EXPECT_TRUE(stub->Encode(&context, request, &response).ok());
  std::filesystem::remove(model);
}

}  // namespace
}  // namespace llm
