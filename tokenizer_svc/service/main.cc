// tokenizer_server: serves llm.v1.Tokenizer for one vocabulary file.
#include <cstdio>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/time/clock.h"
#include "common/flags.h"
#include "common/grpc/request_log.h"
#include "common/grpc/security.h"
#include "common/grpc/server_flags.h"
#include "common/grpc/server_runner.h"
#include "common/metrics/metrics_http.h"
#include "tokenizer_svc/service/tokenizer_service.h"
#include "tokenizer_svc/tokenizer.h"

ABSL_FLAG(std::string, vocab, "",
          "Vocabulary file: a .tiktoken file (pattern and special tokens from the .json sidecar "
          "beside it, or --pattern) or a .gguf model or vocabulary file.");
ABSL_FLAG(std::string, listen, "127.0.0.1:50051",
          "Address to listen on; port 0 picks a free port (printed on startup).");
ABSL_FLAG(std::string, pattern, "", ".tiktoken only: pre-tokenizer regex (overrides the sidecar).");
ABSL_FLAG(std::string, pretokenizer, "",
          ".gguf only: pre-tokenizer preset to use instead of tokenizer.ggml.pre.");
ABSL_FLAG(int, max_request_bytes, 8 << 20,
          "Largest request message accepted; larger ones get RESOURCE_EXHAUSTED.");
ABSL_FLAG(int, max_batch_texts, 1024, "Most texts in one EncodeBatch; more is RESOURCE_EXHAUSTED.");
ABSL_FLAG(double, drain_seconds, 5, "On SIGTERM/SIGINT, time given to in-flight calls.");

int main(int argc, char** argv) {
  llm::BlockTerminationSignals();
  llm::ParseFlags(argc, argv,
                  "Serves the llm.v1.Tokenizer gRPC service (exact BPE over a trie) for one "
                  "vocabulary.\nUsage: tokenizer_server --vocab PATH [--listen 127.0.0.1:50051]");
  const absl::StatusOr<llm::LogLevel> log_level =
      llm::ParseLogLevel(absl::GetFlag(FLAGS_log_level));
  if (!log_level.ok()) {
    std::fprintf(stderr, "tokenizer_server: %s\n",
                 std::string(log_level.status().message()).c_str());
    return 2;
  }
  llm::SetLogLevel(*log_level);
  const std::string vocab = absl::GetFlag(FLAGS_vocab);
  if (vocab.empty()) {
    std::fprintf(stderr, "tokenizer_server: --vocab is required (see --help)\n");
    return 2;
  }
  llm::tok::LoadOptions load;
  load.path = vocab;
  if (!absl::GetFlag(FLAGS_pattern).empty()) load.pattern = absl::GetFlag(FLAGS_pattern);
  if (!absl::GetFlag(FLAGS_pretokenizer).empty()) {
    load.pretokenizer = absl::GetFlag(FLAGS_pretokenizer);
  }
  const absl::Time start = absl::Now();
  auto tokenizer = llm::tok::Tokenizer::Load(load);
  if (!tokenizer.ok()) {
    std::fprintf(stderr, "tokenizer_server: %s\n",
                 std::string(tokenizer.status().message()).c_str());
    return 1;
  }
  std::fprintf(stderr, "tokenizer_server: loaded %s (%zu tokens, pre-tokenizer %s) in %.0f ms\n",
               vocab.c_str(), (*tokenizer)->vocab_size(),
               (*tokenizer)->vocab().pretokenizer.c_str(),
               absl::ToDoubleMilliseconds(absl::Now() - start));

  llm::TokenizerServiceLimits limits;
  limits.max_request_bytes = static_cast<uint64_t>(absl::GetFlag(FLAGS_max_request_bytes));
  limits.max_batch_texts = static_cast<uint32_t>(absl::GetFlag(FLAGS_max_batch_texts));
  std::unique_ptr<llm::MetricsHttp> metrics;
  std::unique_ptr<llm::TokenizerMetrics> tokenizer_metrics;
  if (!absl::GetFlag(FLAGS_metrics_listen).empty()) {
    auto started = llm::MetricsHttp::Start(absl::GetFlag(FLAGS_metrics_listen));
    if (!started.ok()) {
      std::fprintf(stderr, "tokenizer_server: %s\n",
                   std::string(started.status().message()).c_str());
      return 1;
    }
    metrics = std::move(*started);
    tokenizer_metrics = std::make_unique<llm::TokenizerMetrics>(metrics->registry());
  }
  auto credentials = llm::MakeServerCredentials(
      {absl::GetFlag(FLAGS_tls_cert), absl::GetFlag(FLAGS_tls_key), absl::GetFlag(FLAGS_tls_ca)});
  auto token = llm::ReadTokenFile(absl::GetFlag(FLAGS_auth_token_file));
  for (const absl::Status& s : {credentials.status(), token.status()}) {
    if (!s.ok()) {
      std::fprintf(stderr, "tokenizer_server: %s\n", std::string(s.message()).c_str());
      return 2;
    }
  }
  std::unique_ptr<llm::BearerAuth> auth;
  if (!token->empty()) auth = std::make_unique<llm::BearerAuth>(*token);
  llm::TokenizerService service(**tokenizer, limits, tokenizer_metrics.get());
  service.SetAuth(auth.get());
  llm::ServerOptions options;
  options.credentials = *credentials;
  options.listen = absl::GetFlag(FLAGS_listen);
  options.max_receive_bytes = absl::GetFlag(FLAGS_max_request_bytes);
  auto runner = llm::ServerRunner::Start(options, {&service});
  if (!runner.ok()) {
    std::fprintf(stderr, "tokenizer_server: %s\n", std::string(runner.status().message()).c_str());
    return 1;
  }
  (*runner)->SetServing(true);
  // Tests and scripts read this line to learn the port.
  std::printf("tokenizer_server: listening on %s\n", (*runner)->endpoint().c_str());
  if (metrics != nullptr) std::printf("tokenizer_server: metrics on port %d\n", metrics->port());
  std::fflush(stdout);
  const int sig = (*runner)->WaitForTerminationSignal();
  std::fprintf(stderr, "tokenizer_server: signal %d, shutting down\n", sig);
  (*runner)->Shutdown(absl::Seconds(absl::GetFlag(FLAGS_drain_seconds)));
  return 0;
}
