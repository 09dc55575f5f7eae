// The OpenAI-compatible HTTP gateway: a client of the tokenizer and model
// services through the client library (client/generator.h), served over
// HTTP/1.1 by civetweb (docs/gateway.md says why).
//
//   POST /v1/chat/completions   streamed (server-sent events) or not; logprobs;
//                               X-Session-Id keeps a conversation's model session
//   POST /v1/completions        text or token-id prompts (several at once); echo;
//                               logprobs, with the prompt's scores under echo
//   GET  /v1/models, /v1/models/{id}
//   GET  /health                200 when the tokenizer and a model replica are SERVING
//   POST /tokenize, /detokenize text <-> token ids (vLLM's shape)
//   GET  /metrics               Prometheus text format (gateway_metrics.h)
//
// Each generating request leases one Generator (generator_pool.h) for its
// whole duration, encodes its prompts (chat: `messages` rendered with the
// model's chat template), and generates each choice in a new model session
// that it releases afterwards, or, for a conversation (conversations.h), in
// the conversation's session, extended by what the request adds. A streamed
// request whose client goes away is cancelled at the next token it cannot
// write (within two tokens: the first write after the peer closes still
// succeeds).
//
// HTTP side (docs/gateway.md): HTTPS with http_tls (http_tls.h), a bearer
// token on every endpoint but /health and /metrics (http_auth.h), and
// keep-alive for responses with a Content-Length, bounded so that idle
// connections cannot take the workers (keep_alive.h).
//
// Threads: civetweb's workers call the handlers, one request per worker;
// max_concurrent generating requests at once, the next gets 429.
#ifndef LLM_GATEWAY_GATEWAY_H_
#define LLM_GATEWAY_GATEWAY_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/generate/chat_template.h"
#include "client/generator.h"
#include "gateway/choice_writer.h"
#include "gateway/conversations.h"
#include "gateway/gateway_metrics.h"
#include "gateway/generator_pool.h"
#include "gateway/http_auth.h"
#include "gateway/http_tls.h"
#include "gateway/keep_alive.h"
#include "gateway/openai_api.h"

struct mg_context;
struct mg_connection;

namespace llm::gateway {

struct GatewayOptions {
  std::string listen = "127.0.0.1:8080";  // HOST:PORT; port 0 picks a free one
  client::ClientOptions client;           // the services' addresses, deadlines, TLS
  std::string served_model_name;          // the model's id; "" = from its file's name (model_id.h)
  std::string chat_template;              // as llm's --template; "" = the model's own
  int max_concurrent = 64;                // chat requests generating at once
  size_t max_body_bytes = 1 << 20;        // larger request bodies get 413
  RequestLimits limits;
  // Conversations kept for X-Session-Id (conversations.h): at most this
  // many, each forgotten after this idle time (the model service's
  // --session_ttl frees its KV by then too).
  int64_t max_conversations = 1024;
  absl::Duration conversation_ttl = absl::Minutes(10);
  absl::Duration health_timeout = absl::Seconds(2);
  // HTTP side.
  HttpTlsFiles http_tls;        // both set: HTTPS only (no plain HTTP on the port)
  std::string http_auth_token;  // "" = no token needed
  absl::Duration keep_alive_timeout = absl::Seconds(5);  // idle connections; zero: keep-alive off
  // Speculative decoding for requests that do not ask ("speculate"):
  // GenerateParams::speculate, 0..16; 0: off.
  int32_t speculate = 0;
};

class Gateway {
 public:
  // Starts serving with `first` (already connected: it gives the model's
  // Info and chat template, then joins the pool). InvalidArgument for a bad
  // template or option (TLS files that do not load), FailedPrecondition
  // when HTTPS lacks its OpenSSL shims (http_tls.h), Unavailable when
  // `listen` cannot be bound.
  static absl::StatusOr<std::unique_ptr<Gateway>> Start(GatewayOptions options,
                                                        std::unique_ptr<client::Generator> first);
  Gateway(const Gateway&) = delete;
  Gateway& operator=(const Gateway&) = delete;
  // Cancels running generations and stops the server (waits for its workers).
  ~Gateway();

  // Drain (SIGTERM): from now on /health answers 503 ("draining") and new
  // chat and completions requests 503, while those already admitted go on;
  // in_flight() says how many are left. Thread-safe.
  void StartDrain();
  int in_flight() const { return in_flight_.load(std::memory_order_acquire); }

  int port() const { return port_; }
  const std::string& model_id() const { return model_id_; }
  const client::ChatTemplate& chat_template() const { return template_; }

 private:
  Gateway(GatewayOptions options, client::ChatTemplate chat_template)
      : options_(std::move(options)),
        template_(std::move(chat_template)),
        pool_(options_.client, options_.max_concurrent),
        conversations_(options_.max_conversations, options_.conversation_ttl),
        auth_(options_.http_auth_token),
        keep_alive_(options_.keep_alive_timeout, options_.max_concurrent) {}

  // civetweb's callbacks (user data: the Gateway): HTTPS certificate loading,
  // connections opened and closed (keep_alive_), errors while starting.
  static int InitSsl(void* ssl_ctx, void* self);
  static int ConnectionOpened(const mg_connection* conn, void** conn_data);
  static void ConnectionClosed(const mg_connection* conn);
  static int LogMessage(const mg_connection* conn, const char* message);

  // civetweb's handler: Route, then the request's metrics.
  static int Dispatch(mg_connection* conn, void* self);
  // Answers the request; returns the HTTP status sent.
  int Route(mg_connection* conn, const std::string& uri, std::string_view method);
  // A prompt's ids and its text (what a completions echo shows).
  struct PromptIds {
    std::vector<int32_t> ids;
    std::string text;
    size_t cached = 0;  // leading ids the conversation's session holds already
  };
  int HandleChat(mg_connection* conn);
  int HandleCompletions(mg_connection* conn);
  // Generates n choices of each prompt in turn on the leased generator and
  // answers through `writer` (streamed or not). Each choice runs in a new
  // model session, released at its end, or with `conversation` (one prompt,
  // n = 1) in that session, which keeps the answer. Returns the HTTP status.
  int Serve(mg_connection* conn, absl::Time arrival, GenerationRequest& req,
            const std::vector<PromptIds>& prompts, ChoiceWriter& writer,
            GeneratorPool::Lease& lease, client::Session* conversation = nullptr);
  std::optional<ApiError> CheckModel(const GenerationRequest& req) const;
  // 400 (context_length_exceeded, naming `param`) for a prompt that fills the context.
  std::optional<ApiError> CheckPromptLength(int64_t tokens, std::string_view param) const;
  // Prepares a conversation's session for `ids`: keeps the longest prefix
  // it shares with them (at most all but the last id) and returns its length,
  // the ids not to prefill again (0: a new session).
  static size_t ReuseSession(client::Generator& g, const std::vector<int32_t>& ids,
                             client::Session& session);
  // Token texts through `g` (its cache of the vocabulary's bytes).
  static TokenText TextOf(client::Generator& g);
  int HandleModels(mg_connection* conn, const std::string& uri);
  int HandleHealth(mg_connection* conn);
  int HandleTokenize(mg_connection* conn, bool detokenize);

  const GatewayOptions options_;
  const client::ChatTemplate template_;
  GeneratorPool pool_;
  Conversations conversations_;
  GatewayMetrics metrics_;
  std::string model_id_;
  int64_t context_length_ = 0;
  int64_t vocab_size_ = 0;
  bool add_bos_ = false;  // raw template only: the vocabulary's BOS first
  int64_t created_ = 0;   // the model's "created": when the gateway started
  const HttpAuth auth_;
  KeepAlive keep_alive_;
  std::atomic<bool> started_{false};
  std::mutex start_log_mu_;
  std::string start_log_;    // civetweb's messages until started_ (why it failed)
  absl::Status tls_status_;  // InitSsl's outcome; written before mg_start2 returns
  mg_context* ctx_ = nullptr;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> draining_{false};
  std::atomic<int> in_flight_{0};  // chat and completions requests being handled
};

}  // namespace llm::gateway

#endif  // LLM_GATEWAY_GATEWAY_H_
