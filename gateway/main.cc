// llm_gateway: the OpenAI-compatible HTTP gateway over the tokenizer and
// model services (docs/gateway.md).
#include <signal.h>

#include <cstdio>
#include <ctime>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "client/services.h"
#include "common/flags.h"
#include "common/grpc/security.h"
#include "common/grpc/security_flags.h"
#include "common/strings.h"
#include "gateway/gateway.h"
#include "gateway/http_tls.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:8080",
          "HTTP address to serve on, HOST:PORT (port 0: a free one, printed on stdout).");
ABSL_FLAG(std::string, tokenizer, "127.0.0.1:50051", "Tokenizer service address.");
ABSL_FLAG(std::string, model, "127.0.0.1:50052",
          "Model service: HOST:PORT, a comma-separated list of replicas, or dns:///NAME:PORT "
          "(as llm's --model).");
ABSL_FLAG(std::string, served_model_name, "",
          "The model's id in the API (\"model\" of requests, /v1/models). Empty: the model "
          "file's name without .gguf and its quantization (SmolLM2-135M-Instruct.Q4_1.gguf: "
          "SmolLM2-135M-Instruct).");
ABSL_FLAG(std::string, template, "",
          "Chat template instead of the model's own: a built-in one (chatml, gemma, llama3, "
          "mistral, phi3, qwen, zephyr), raw, or a Jinja file (as llm's --template).");
ABSL_FLAG(int, max_concurrent, 64,
          "Chat and completions requests generating at once; the next ones wait (--max_queued).");
ABSL_FLAG(int, max_queued, 128,
          "Requests waiting for one of the --max_concurrent places, first come first served; "
          "past it a request is answered 429 with Retry-After. 0: no queue.");
ABSL_FLAG(double, queue_timeout, 30,
          "How long a request waits for a place before it is answered 429, s.");
ABSL_FLAG(std::string, admin_listen, "",
          "HOST:PORT serving only GET /health and /metrics, with workers of their own, so that "
          "probes and scrapes are answered however busy --listen is (plain HTTP). Empty: none "
          "(they are served on --listen as well in any case).");
ABSL_FLAG(double, http_request_timeout, 10,
          "A request's line and headers must arrive within this many seconds (slow clients "
          "hold a worker no longer); also the longest wait for one read or write of a body.");
ABSL_FLAG(double, http_body_timeout, 30,
          "A request's body must arrive within this many seconds, else 408.");
ABSL_FLAG(int64_t, max_body_bytes, 1 << 20, "Largest request body; larger ones get 413.");
ABSL_FLAG(double, timeout, 60, "Deadline of each call to a service (and each stream step), s.");
ABSL_FLAG(double, reconnect_timeout, 30,
          "How long a request retries a model service that is down (a restarting replica) "
          "before it is answered 503, s.");
ABSL_FLAG(double, wait_ready, 120,
          "At startup, wait up to this many seconds for services that are still loading.");
ABSL_FLAG(double, drain_timeout, 30,
          "On SIGTERM, how long running requests may go on (new ones get 503, /health 503) "
          "before they are cancelled, s; a second signal cuts it short.");
ABSL_FLAG(std::string, http_tls_cert, "",
          "PEM certificate chain: serve HTTPS (only) on --listen; needs --http_tls_key. (The "
          "--tls_* flags are the gateway's client side, to the services.)");
ABSL_FLAG(std::string, http_tls_key, "", "PEM private key of --http_tls_cert (unencrypted).");
ABSL_FLAG(std::string, http_auth_token_file, "",
          "File holding the API key (surrounding whitespace ignored): every request but GET "
          "/health and /metrics must send 'Authorization: Bearer <key>', else 401. (The "
          "gateway's --auth_token_file is the services' token.)");
ABSL_FLAG(double, http_keep_alive_timeout, 5,
          "HTTP keep-alive: an idle connection is closed after this many seconds; 0 closes "
          "every connection after its response. Streamed responses always close.");

ABSL_FLAG(int, speculate, 0,
          "Speculative decoding for requests that do not set \"speculate\": propose up to N "
          "tokens per decode step from n-gram matches in the conversation (the same output; "
          "faster when answers repeat their input; rejected proposals cost rows in the shared "
          "batch). 0..16; 0: off.");

namespace {

void Fail(const std::string& message) {
  std::fprintf(stderr, "llm_gateway: %s\n", message.c_str());
}

// HOST:PORT of --listen with the port bound (port 0 picks one); a --listen
// without a host serves every interface.
std::string BoundAddress(const std::string& listen, int port) {
  const size_t colon = listen.rfind(':');
  return llm::StrCat(colon == std::string::npos ? "0.0.0.0" : listen.substr(0, colon), ":", port);
}

}  // namespace

int main(int argc, char** argv) {
  llm::ParseFlags(
      argc, argv,
      "An OpenAI-compatible HTTP API (/v1/chat/completions, /v1/completions, /v1/models, "
      "/health, /metrics, /tokenize, /detokenize) over the tokenizer and model services.\n"
      "Usage: llm_gateway [--listen 127.0.0.1:8080] [--tokenizer HOST:PORT] "
      "[--model HOST:PORT]");
  // Signals are taken by sigwait below; the server's threads inherit the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a client gone mid-write is an error return, not a signal

  llm::gateway::GatewayOptions options;
  llm::gateway::HandlerOptions& api = options.api;
  options.listen = absl::GetFlag(FLAGS_listen);
  options.admin_listen = absl::GetFlag(FLAGS_admin_listen);
  api.served_model_name = absl::GetFlag(FLAGS_served_model_name);
  options.chat_template = absl::GetFlag(FLAGS_template);
  api.admission.max_active = absl::GetFlag(FLAGS_max_concurrent);
  api.admission.max_queued = absl::GetFlag(FLAGS_max_queued);
  const double queue_timeout = absl::GetFlag(FLAGS_queue_timeout);
  const int64_t max_body = absl::GetFlag(FLAGS_max_body_bytes);
  const double timeout = absl::GetFlag(FLAGS_timeout);
  const double wait_ready = absl::GetFlag(FLAGS_wait_ready);
  const double reconnect = absl::GetFlag(FLAGS_reconnect_timeout);
  const double request_timeout = absl::GetFlag(FLAGS_http_request_timeout);
  const double body_timeout = absl::GetFlag(FLAGS_http_body_timeout);
  if (api.admission.max_active < 1 || api.admission.max_queued < 0 || max_body < 1 ||
      !(timeout > 0) || !(wait_ready >= 0) || !(reconnect >= 0) || !(queue_timeout >= 0) ||
      !(request_timeout > 0) || !(body_timeout > 0)) {
    Fail(
        "--max_concurrent and --max_body_bytes must be >= 1, --max_queued >= 0, --timeout, "
        "--http_request_timeout and --http_body_timeout > 0, --wait_ready, --reconnect_timeout "
        "and --queue_timeout >= 0");
    return 2;
  }
  api.admission.queue_timeout = absl::Seconds(queue_timeout);
  api.max_body_bytes = static_cast<size_t>(max_body);
  options.request_timeout = absl::Seconds(request_timeout);
  api.body_timeout = absl::Seconds(body_timeout);
  api.speculate = absl::GetFlag(FLAGS_speculate);
  if (api.speculate < 0 || api.speculate > llm::client::kMaxProposedTokens) {
    Fail("--speculate must be in [0, 16]");
    return 2;
  }
  const double drain_timeout = absl::GetFlag(FLAGS_drain_timeout);
  if (!(drain_timeout >= 0)) {
    Fail("--drain_timeout must be >= 0");
    return 2;
  }
  llm::client::ClientOptions client;
  client.tokenizer_address = absl::GetFlag(FLAGS_tokenizer);
  client.model_address = absl::GetFlag(FLAGS_model);
  client.rpc_timeout = absl::Seconds(timeout);
  client.ready_timeout = absl::Seconds(wait_ready);
  client.reconnect_timeout = absl::Seconds(reconnect);
  absl::StatusOr<llm::client::SecurityFlags> security = llm::client::SecurityFromFlags();
  if (!security.ok()) {
    Fail(std::string(security.status().message()));
    return 2;
  }
  client.tls = security->tls;
  client.tls_server_name = security->server_name;
  client.auth_token = security->token;
  // The HTTP side: checked before waiting for the services, so that a bad
  // file is reported at once.
  options.http_tls = {absl::GetFlag(FLAGS_http_tls_cert), absl::GetFlag(FLAGS_http_tls_key)};
  if (absl::Status s = llm::gateway::CheckHttpTls(options.http_tls); !s.ok()) {
    Fail(std::string(s.message()));
    return 2;
  }
  if (options.http_tls.enabled()) {
    if (absl::Status s = llm::gateway::PrepareCivetwebOpenSsl(); !s.ok()) {
      Fail(std::string(s.message()));
      return 1;
    }
  }
  absl::StatusOr<std::string> http_token =
      llm::ReadTokenFile(absl::GetFlag(FLAGS_http_auth_token_file));
  if (!http_token.ok()) {
    Fail(llm::StrCat("--http_auth_token_file: ", http_token.status().message()));
    return 2;
  }
  api.http_auth_token = *std::move(http_token);
  const double keep_alive = absl::GetFlag(FLAGS_http_keep_alive_timeout);
  if (!(keep_alive >= 0) || keep_alive > 3600) {
    Fail("--http_keep_alive_timeout must be in [0, 3600] seconds");
    return 2;
  }
  options.keep_alive_timeout = absl::Seconds(keep_alive);

  absl::StatusOr<std::shared_ptr<llm::client::Services>> services =
      llm::client::Services::Connect(client);
  if (!services.ok()) {
    Fail(std::string(services.status().message()));
    return absl::IsInvalidArgument(services.status()) ? 2 : 1;
  }
  absl::StatusOr<std::unique_ptr<llm::gateway::Gateway>> gateway =
      llm::gateway::Gateway::Start(options, *std::move(services));
  if (!gateway.ok()) {
    Fail(std::string(gateway.status().message()));
    return absl::IsInvalidArgument(gateway.status()) ? 2 : 1;
  }
  std::printf("llm_gateway: listening on port %d\n", (*gateway)->port());
  if ((*gateway)->admin_port() != 0) {
    std::printf("llm_gateway: admin on port %d\n", (*gateway)->admin_port());
  }
  std::fflush(stdout);
  // The address as bound: the port the OS picked for port 0.
  std::fprintf(stderr, "llm_gateway: serving model '%s' (%s chat template) on %s://%s%s\n",
               (*gateway)->model_id().c_str(),
               std::string((*gateway)->chat_template().name()).c_str(),
               options.http_tls.enabled() ? "https" : "http",
               BoundAddress(options.listen, (*gateway)->port()).c_str(),
               api.http_auth_token.empty() ? "" : " (API key required)");
  if ((*gateway)->admin_port() != 0) {
    std::fprintf(stderr, "llm_gateway: /health and /metrics also on http://%s\n",
                 BoundAddress(options.admin_listen, (*gateway)->admin_port()).c_str());
  }
  int sig = 0;
  sigwait(&stop_signals, &sig);
  // Drain: /health turns 503 so that load balancers stop sending, new
  // generating requests get 503, and those running finish, for up to
  // --drain_timeout; a second signal, or the time running out, cancels what
  // is left.
  (*gateway)->StartDrain();
  const absl::Time give_up = absl::Now() + absl::Seconds(drain_timeout);
  std::fprintf(stderr, "llm_gateway: signal %d, draining (%d requests in flight, up to %.1f s)\n",
               sig, (*gateway)->in_flight(), drain_timeout);
  const timespec tick{0, 100 * 1000 * 1000};
  while ((*gateway)->in_flight() > 0 && absl::Now() < give_up) {
    if (sigtimedwait(&stop_signals, nullptr, &tick) > 0) break;  // a second signal
  }
  std::fprintf(stderr, "llm_gateway: shutting down (%d requests cancelled)\n",
               (*gateway)->in_flight());
  gateway->reset();
  return 0;
}
