#include "gateway/gateway.h"

#include <civetweb.h>

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "client/generate/template_choice.h"
#include "client/transport/health.h"
#include "client/transport/model_client.h"
#include "client/transport/model_target.h"
#include "common/grpc/security.h"
#include "common/strings.h"
#include "gateway/civetweb_exchange.h"

namespace llm::gateway {
namespace {

// Workers of the admin listener: a probe and a scrape at once, and spares.
constexpr int kAdminWorkers = 4;

absl::StatusOr<std::shared_ptr<grpc::Channel>> HealthChannel(const client::ClientOptions& o,
                                                             const std::string& address) {
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> creds = MakeChannelCredentials(o.tls);
  if (!creds.ok()) return creds.status();
  grpc::ChannelArguments args;
  if (!o.tls_server_name.empty()) args.SetSslTargetNameOverride(o.tls_server_name);
  return CreateAuthChannel(address, *creds, args, o.auth_token);
}

// "SERVING", or why not.
std::string ServingState(const client::ClientOptions& o, const std::string& address,
                         const std::string& service, absl::Duration timeout) {
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = HealthChannel(o, address);
  if (!channel.ok()) return std::string(channel.status().message());
  absl::StatusOr<client::ServingStatus> s = client::CheckHealth(*channel, service, timeout);
  if (!s.ok()) return StrCat("NOT SERVING: ", s.status().message());
  return *s == client::ServingStatus::kServing ? "SERVING" : "NOT SERVING";
}

// /health's view of the services: the tokenizer, and every model replica.
HealthCheck GrpcHealth(client::ClientOptions o, absl::Duration timeout) {
  return [o = std::move(o), timeout] {
    ServiceHealth health;
    health.tokenizer.emplace_back(
        o.tokenizer_address,
        ServingState(o, o.tokenizer_address, client::kTokenizerServiceName, timeout));
    absl::StatusOr<client::ModelTarget> target = client::ParseModelTarget(o.model_address);
    absl::StatusOr<std::vector<std::string>> replicas =
        target.ok() ? client::TargetAddresses(*target)
                    : absl::StatusOr<std::vector<std::string>>(target.status());
    if (!replicas.ok()) {
      health.model.emplace_back(o.model_address, std::string(replicas.status().message()));
      return health;
    }
    for (const std::string& address : *replicas) {
      health.model.emplace_back(address,
                                ServingState(o, address, client::kModelServiceName, timeout));
    }
    return health;
  };
}

}  // namespace

absl::StatusOr<std::unique_ptr<Gateway>> Gateway::Start(
    GatewayOptions options, std::shared_ptr<client::Services> services) {
  if (options.api.admission.max_active < 1 || options.api.admission.max_queued < 0) {
    return absl::InvalidArgumentError("max_concurrent must be >= 1 and max_queued >= 0");
  }
  absl::StatusOr<client::TemplateChoice> choice =
      client::ChooseChatTemplate(services->template_info(), options.chat_template);
  if (!choice.ok()) return choice.status();
  if (!choice->note.empty()) std::fprintf(stderr, "llm_gateway: %s\n", choice->note.c_str());
  if (const client::ModelClient* model = services->grpc_model(); model != nullptr) {
    options.api.prefix_routed = [model, services] { return model->pool().prefix_routed(); };
  }
  std::unique_ptr<Gateway> gw(new Gateway(std::move(options)));
  gw->handler_ =
      std::make_unique<Handler>(gw->options_.api, services, std::move(choice->chat_template),
                                GrpcHealth(services->options(), gw->options_.health_timeout));
  const bool tls = gw->options_.http_tls.enabled();
  if (tls) {
    if (absl::Status s = PrepareCivetwebOpenSsl(); !s.ok()) return s;
  }
  absl::StatusOr<int> port = gw->Listen(gw->options_.listen, tls, /*admin=*/false, &gw->ctx_);
  if (!port.ok()) return port.status();
  gw->port_ = *port;
  if (!gw->options_.admin_listen.empty()) {
    absl::StatusOr<int> admin =
        gw->Listen(gw->options_.admin_listen, /*tls=*/false, /*admin=*/true, &gw->admin_ctx_);
    if (!admin.ok()) return admin.status();
    gw->admin_port_ = *admin;
  }
  gw->started_.store(true);
  return gw;
}

absl::StatusOr<int> Gateway::Listen(const std::string& address, bool tls, bool admin,
                                    mg_context** ctx) {
  // Workers: one per generating request and per request waiting for one, a
  // few for the quick endpoints, and the idle kept-alive connections
  // (keep_alive.h). The admin listener: a few, no keep-alive.
  const AdmissionOptions& admission = options_.api.admission;
  const std::string threads = std::to_string(
      admin ? kAdminWorkers : keep_alive_.Threads(admission.max_active + admission.max_queued));
  const std::string listening = address + (tls ? "s" : "");  // "s": TLS there
  const bool keep_alive = !admin && keep_alive_.enabled();
  const std::string keep_alive_ms =
      std::to_string(absl::ToInt64Milliseconds(keep_alive_.timeout()));
  const std::string request_timeout_ms =
      std::to_string(std::max<int64_t>(1, absl::ToInt64Milliseconds(options_.request_timeout)));
  std::vector<const char*> mg_options = {"listening_ports",       listening.c_str(),
                                         "num_threads",           threads.c_str(),
                                         "request_timeout_ms",    request_timeout_ms.c_str(),
                                         "enable_keep_alive",     keep_alive ? "yes" : "no",
                                         "keep_alive_timeout_ms", keep_alive_ms.c_str()};
  if (tls) mg_options.insert(mg_options.end(), {"ssl_protocol_version", "4"});  // TLS 1.2+
  mg_options.push_back(nullptr);
  mg_callbacks callbacks = {};
  callbacks.log_message = &Gateway::LogMessage;
  callbacks.http_error = &Gateway::HttpError;
  if (!admin) {
    callbacks.init_ssl = &Gateway::InitSsl;
    callbacks.init_connection = &Gateway::ConnectionOpened;
    callbacks.connection_close = &Gateway::ConnectionClosed;
  }
  mg_init_data init = {};
  init.callbacks = &callbacks;
  init.user_data = this;
  init.configuration_options = mg_options.data();
  char error_text[256] = "";
  unsigned error_code = 0;
  mg_error_data error = {};
  error.code = &error_code;
  error.text = error_text;
  error.text_buffer_size = sizeof(error_text);
  *ctx = mg_start2(&init, &error);
  if (*ctx == nullptr) {
    if (!tls_status_.ok()) return tls_status_;
    std::lock_guard<std::mutex> lock(start_log_mu_);
    return absl::UnavailableError(StrCat("cannot serve ", tls ? "HTTPS" : "HTTP", " on ", address,
                                         ": ", error_text, start_log_.empty() ? "" : " (",
                                         start_log_, start_log_.empty() ? "" : ")"));
  }
  mg_server_port ports[4] = {};
  if (mg_get_server_ports(*ctx, 4, ports) < 1) {
    return absl::UnavailableError(StrCat("no listening port for ", address));
  }
  mg_set_request_handler(*ctx, "**", admin ? &Gateway::DispatchAdmin : &Gateway::Dispatch, this);
  return ports[0].port;
}

Gateway::~Gateway() {
  if (handler_ != nullptr) handler_->Stop();
  if (ctx_ != nullptr) mg_stop(ctx_);
  if (admin_ctx_ != nullptr) mg_stop(admin_ctx_);
}

int Gateway::InitSsl(void* ssl_ctx, void* self) {
  auto* gw = static_cast<Gateway*>(self);
  gw->tls_status_ = LoadHttpTls(ssl_ctx, gw->options_.http_tls);
  return gw->tls_status_.ok() ? 1 : -1;  // 1: the certificate is set up
}

int Gateway::ConnectionOpened(const mg_connection* conn, void** conn_data) {
  auto* gw = static_cast<Gateway*>(mg_get_user_data(mg_get_context(conn)));
  gw->keep_alive_.Opened();
  *conn_data = gw;  // marks it counted: a failed TLS handshake is closed, never opened
  return 0;
}

void Gateway::ConnectionClosed(const mg_connection* conn) {
  auto* gw = static_cast<Gateway*>(mg_get_user_connection_data(conn));
  if (gw != nullptr) gw->keep_alive_.Closed();
}

int Gateway::LogMessage(const mg_connection* conn, const char* message) {
  auto* gw = static_cast<Gateway*>(mg_get_user_data(mg_get_context(conn)));
  if (gw != nullptr && !gw->started_.load()) {  // still starting: kept for Start's error
    std::lock_guard<std::mutex> lock(gw->start_log_mu_);
    if (!gw->start_log_.empty()) gw->start_log_ += "; ";
    gw->start_log_ += message;
  }
  return 1;  // handled: civetweb writes no log file
}

int Gateway::HttpError(mg_connection* conn, int status, const char* message) {
  ApiError e;
  e.http_status = status;
  e.message = StrCat("HTTP ", status, " ", mg_get_response_code_text(conn, status),
                     message != nullptr && *message != '\0' ? StrCat(": ", message) : "");
  if (status >= 500) e.type = "server_error";
  const std::string body = Dump(ErrorJson(e)) + '\n';
  const std::string length = std::to_string(body.size());
  mg_response_header_start(conn, status);
  mg_response_header_add(conn, "Content-Type", "application/json", -1);
  mg_response_header_add(conn, "Content-Length", length.c_str(), -1);
  mg_response_header_send(conn);
  mg_write(conn, body.data(), body.size());
  return 0;  // handled
}

int Gateway::Dispatch(mg_connection* conn, void* self) {
  auto* gw = static_cast<Gateway*>(self);
  CivetwebExchange http(conn);
  if (!gw->keep_alive_.MayKeepOpen(http.content_length(),
                                   mg_get_header(conn, "Transfer-Encoding") != nullptr,
                                   static_cast<int64_t>(gw->options_.api.max_body_bytes))) {
    mg_disable_connection_keep_alive(conn);
  }
  const int code = gw->handler_->Handle(http);
  // A streamed response has no Content-Length: the connection's end is its end.
  if (!http.framed()) mg_disable_connection_keep_alive(conn);
  return code;
}

int Gateway::DispatchAdmin(mg_connection* conn, void* self) {
  CivetwebExchange http(conn);
  return static_cast<Gateway*>(self)->handler_->HandleAdmin(http);
}

}  // namespace llm::gateway
