// The OpenAI-compatible HTTP gateway: the endpoints (handler.h) served over
// HTTP/1.1 by civetweb (docs/gateway.md says why), with the services reached
// over gRPC through the client library (client/services.h).
//
// HTTP side (docs/gateway.md): HTTPS with http_tls (http_tls.h), a bearer
// token on every endpoint but /health and /metrics (http_auth.h),
// keep-alive for responses with a Content-Length, bounded so that idle
// connections cannot take the workers (keep_alive.h), a request's headers
// bounded in time (request_timeout) and its body too (HandlerOptions::
// body_timeout), and civetweb's own errors (a malformed request line, an
// unknown method) in OpenAI's error shape.
//
// The admin listener (admin_listen): /health and /metrics on a port of their
// own, with workers of their own, so that a readiness probe and a scrape
// are answered however many clients hold the API's workers (slow clients,
// a flood of connections).
//
// Threads: civetweb's workers call the handler, one request per worker:
// max_concurrent generating, max_queued waiting for them, 8 more for quick
// requests, and the idle kept-alive connections.
#ifndef LLM_GATEWAY_GATEWAY_H_
#define LLM_GATEWAY_GATEWAY_H_

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/generate/chat_template.h"
#include "client/services.h"
#include "gateway/handler.h"
#include "gateway/http_tls.h"
#include "gateway/keep_alive.h"

struct mg_context;
struct mg_connection;

namespace llm::gateway {

struct GatewayOptions {
  std::string listen = "127.0.0.1:8080";  // HOST:PORT; port 0 picks a free one
  std::string admin_listen;               // HOST:PORT for /health and /metrics alone; "": none
  std::string chat_template;              // as llm's --template; "" = the model's own
  HandlerOptions api;                     // the endpoints' options
  absl::Duration health_timeout = absl::Seconds(2);
  // HTTP side.
  HttpTlsFiles http_tls;  // both set: HTTPS only on `listen` (the admin listener is plain HTTP)
  absl::Duration keep_alive_timeout = absl::Seconds(5);  // idle connections; zero: keep-alive off
  // A request's line and headers must arrive within this; also the longest
  // wait for one read or write of a request's body or response.
  absl::Duration request_timeout = absl::Seconds(10);
};

class Gateway {
 public:
  // Starts serving over `services` (connected: they give the model's Info
  // and chat template). InvalidArgument for a bad template or option (TLS
  // files that do not load), FailedPrecondition when HTTPS lacks its OpenSSL
  // shims (http_tls.h), Unavailable when an address cannot be bound.
  static absl::StatusOr<std::unique_ptr<Gateway>> Start(GatewayOptions options,
                                                        std::shared_ptr<client::Services> services);
  Gateway(const Gateway&) = delete;
  Gateway& operator=(const Gateway&) = delete;
  // Cancels running generations and stops the servers (waits for their workers).
  ~Gateway();

  // Drain (Handler::StartDrain). Thread-safe.
  void StartDrain() { handler_->StartDrain(); }
  int in_flight() const { return handler_->in_flight(); }

  int port() const { return port_; }
  int admin_port() const { return admin_port_; }  // 0: no admin listener
  const std::string& model_id() const { return handler_->model_id(); }
  const client::ChatTemplate& chat_template() const { return handler_->chat_template(); }

 private:
  explicit Gateway(GatewayOptions options)
      : options_(std::move(options)),
        keep_alive_(options_.keep_alive_timeout, options_.api.admission.max_active) {}

  // Starts one civetweb server; its port.
  absl::StatusOr<int> Listen(const std::string& address, bool tls, bool admin, mg_context** ctx);

  // civetweb's callbacks (user data: the Gateway): HTTPS certificate loading,
  // connections opened and closed (keep_alive_), errors while starting,
  // civetweb's own error responses.
  static int InitSsl(void* ssl_ctx, void* self);
  static int ConnectionOpened(const mg_connection* conn, void** conn_data);
  static void ConnectionClosed(const mg_connection* conn);
  static int LogMessage(const mg_connection* conn, const char* message);
  static int HttpError(mg_connection* conn, int status, const char* message);
  // civetweb's request handlers: the API, and the admin listener.
  static int Dispatch(mg_connection* conn, void* self);
  static int DispatchAdmin(mg_connection* conn, void* self);

  const GatewayOptions options_;
  std::unique_ptr<Handler> handler_;
  KeepAlive keep_alive_;
  std::atomic<bool> started_{false};
  std::mutex start_log_mu_;
  std::string start_log_;    // civetweb's messages until started_ (why it failed)
  absl::Status tls_status_;  // InitSsl's outcome; written before mg_start2 returns
  mg_context* ctx_ = nullptr;
  mg_context* admin_ctx_ = nullptr;
  int port_ = 0;
  int admin_port_ = 0;
};

}  // namespace llm::gateway

#endif  // LLM_GATEWAY_GATEWAY_H_
