#include "gateway/gateway.h"

#include <civetweb.h>

#include <cstdio>
#include <ctime>
#include <mutex>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "client/generate/template_choice.h"
#include "client/transport/health.h"
#include "client/transport/model_target.h"
#include "common/grpc/security.h"
#include "common/strings.h"

namespace llm::gateway {
namespace {

using nlohmann::json;

// An OpenAI error for a failed call to a service.
ApiError FromStatus(const absl::Status& s) {
  ApiError e;
  e.message = std::string(s.message());
  switch (s.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      e.http_status = 400;
      break;
    case absl::StatusCode::kResourceExhausted:
      e.http_status = 429;
      e.type = "rate_limit_error";
      e.code = "rate_limit_exceeded";
      break;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kUnimplemented:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kUnauthenticated:
      e.http_status = 503;
      e.type = "server_error";
      e.code = "service_unavailable";
      break;
    default:
      e.http_status = 500;
      e.type = "server_error";
      break;
  }
  return e;
}

bool WriteAll(mg_connection* conn, std::string_view data) {
  return mg_write(conn, data.data(), data.size()) == static_cast<int>(data.size());
}

// Set by SendBody: this worker's current request got a response with a
// Content-Length, so its connection may stay open (Dispatch). civetweb runs
// one request at a time on a worker thread.
thread_local bool t_framed_response = false;

// A whole response. civetweb writes the Connection header: keep-alive unless
// Dispatch has disabled it for this request (or the client asked to close).
int SendBody(mg_connection* conn, int status, const char* content_type, std::string_view text,
             const char* www_authenticate = nullptr) {
  const std::string length = std::to_string(text.size());
  mg_response_header_start(conn, status);
  mg_response_header_add(conn, "Content-Type", content_type, -1);
  mg_response_header_add(conn, "Content-Length", length.c_str(), -1);
  mg_response_header_add(conn, "Cache-Control", "no-store", -1);
  if (www_authenticate != nullptr) {
    mg_response_header_add(conn, "WWW-Authenticate", www_authenticate, -1);
  }
  mg_response_header_send(conn);
  const char* method = mg_get_request_info(conn)->request_method;
  if (method == nullptr || std::string_view(method) != "HEAD") WriteAll(conn, text);
  t_framed_response = true;
  return status;
}

int SendJson(mg_connection* conn, int status, const json& body) {
  return SendBody(conn, status, "application/json", Dump(body) + '\n');
}

int SendError(mg_connection* conn, const ApiError& e) {
  return SendJson(conn, e.http_status, ErrorJson(e));
}

ApiError NotFound(std::string_view what) {
  ApiError e;
  e.http_status = 404;
  e.message = std::string(what);
  e.code = "not_found";
  return e;
}

// The request body, at most `limit` bytes; an error (413) past it.
std::optional<ApiError> ReadBody(mg_connection* conn, size_t limit, std::string* body) {
  const mg_request_info* info = mg_get_request_info(conn);
  ApiError too_large;
  too_large.http_status = 413;
  too_large.message = StrCat("the request body is larger than ", limit, " bytes");
  if (info->content_length > 0 && static_cast<uint64_t>(info->content_length) > limit) {
    return too_large;
  }
  char buf[16384];
  while (true) {
    const int n = mg_read(conn, buf, sizeof(buf));
    if (n <= 0) break;
    body->append(buf, static_cast<size_t>(n));
    if (body->size() > limit) return too_large;
  }
  return std::nullopt;
}

std::string NewId(std::string_view prefix) {
  thread_local std::mt19937_64 rng(std::random_device{}());
  char hex[33];
  std::snprintf(hex, sizeof(hex), "%016llx%016llx", static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng()));
  return StrCat(prefix, std::string_view(hex, 24));
}

uint64_t RandomSeed() {
  thread_local std::mt19937_64 rng(std::random_device{}());
  return rng();
}

// The chat template, as `llm generate` chooses it (template_choice.h).
absl::StatusOr<client::ChatTemplate> ChooseTemplate(const client::Generator& g,
                                                    const std::string& flag) {
  absl::StatusOr<client::TemplateChoice> choice =
      client::ChooseChatTemplate(g.template_info(), flag);
  if (!choice.ok()) return choice.status();
  if (!choice->note.empty()) std::fprintf(stderr, "llm_gateway: %s\n", choice->note.c_str());
  return choice->chat_template;
}

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

// A conversation's prompt text with `t`, as HandleChat renders it: a Jinja
// template renders the whole conversation; a written-out one formats it as
// the first turn, whose assistant header is dropped without
// add_generation_prompt.
absl::StatusOr<std::string> RenderChat(const client::ChatTemplate& t,
                                       std::span<const client::ChatMessage> messages,
                                       bool add_generation_prompt) {
  if (t.kind() == client::ChatTemplate::Kind::kJinja) {
    return t.Render(messages, add_generation_prompt);
  }
  std::string text = t.FormatTurn(messages, /*first=*/true);
  if (!add_generation_prompt) {
    const std::string header = t.FormatTurn({}, /*first=*/false);
    if (absl::EndsWith(text, header)) text.resize(text.size() - header.size());
  }
  return text;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Gateway>> Gateway::Start(GatewayOptions options,
                                                        std::unique_ptr<client::Generator> first) {
  if (options.max_concurrent < 1) {
    return absl::InvalidArgumentError("max_concurrent must be >= 1");
  }
  absl::StatusOr<client::ChatTemplate> tmpl = ChooseTemplate(*first, options.chat_template);
  if (!tmpl.ok()) return tmpl.status();
  std::unique_ptr<Gateway> gw(new Gateway(std::move(options), *std::move(tmpl)));
  const v1::ModelInfo& model = first->model_info();
  gw->model_id_ = gw->options_.served_model_name;
  if (gw->model_id_.empty()) {
    // general.name with '-' for blanks, so that it is a path segment too.
    gw->model_id_ = model.name().empty() ? model.architecture() : model.name();
    for (char& c : gw->model_id_) {
      if (c == ' ' || c == '\t' || c == '/') c = '-';
    }
  }
  gw->context_length_ = model.context_length();
  gw->vocab_size_ = model.vocab_size();
  gw->add_bos_ = first->tokenizer_info().add_bos();
  gw->created_ = static_cast<int64_t>(std::time(nullptr));
  gw->pool_.AddIdle(std::move(first));

  // Workers: one per generating request, a few for the quick endpoints, and
  // the idle kept-alive connections (keep_alive.h).
  const bool tls = gw->options_.http_tls.enabled();
  const std::string threads = std::to_string(gw->keep_alive_.Threads(gw->options_.max_concurrent));
  const std::string listening = gw->options_.listen + (tls ? "s" : "");  // "s": TLS there
  const std::string keep_alive_ms =
      std::to_string(absl::ToInt64Milliseconds(gw->keep_alive_.timeout()));
  std::vector<const char*> mg_options = {
      "listening_ports",       listening.c_str(),
      "num_threads",           threads.c_str(),
      "request_timeout_ms",    "30000",
      "enable_keep_alive",     gw->keep_alive_.enabled() ? "yes" : "no",
      "keep_alive_timeout_ms", keep_alive_ms.c_str()};
  if (tls) {
    if (absl::Status s = PrepareCivetwebOpenSsl(); !s.ok()) return s;
    mg_options.insert(mg_options.end(), {"ssl_protocol_version", "4"});  // TLS 1.2 and later
  }
  mg_options.push_back(nullptr);
  mg_callbacks callbacks = {};
  callbacks.init_ssl = &Gateway::InitSsl;
  callbacks.init_connection = &Gateway::ConnectionOpened;
  callbacks.connection_close = &Gateway::ConnectionClosed;
  callbacks.log_message = &Gateway::LogMessage;
  mg_init_data init = {};
  init.callbacks = &callbacks;
  init.user_data = gw.get();
  init.configuration_options = mg_options.data();
  char error_text[256] = "";
  unsigned error_code = 0;
  mg_error_data error = {};
  error.code = &error_code;
  error.text = error_text;
  error.text_buffer_size = sizeof(error_text);
  gw->ctx_ = mg_start2(&init, &error);
  if (gw->ctx_ == nullptr) {
    if (!gw->tls_status_.ok()) return gw->tls_status_;
    std::lock_guard<std::mutex> lock(gw->start_log_mu_);
    return absl::UnavailableError(StrCat(
        "cannot serve ", tls ? "HTTPS" : "HTTP", " on ", gw->options_.listen, ": ", error_text,
        gw->start_log_.empty() ? "" : " (", gw->start_log_, gw->start_log_.empty() ? "" : ")"));
  }
  mg_server_port ports[4] = {};
  if (mg_get_server_ports(gw->ctx_, 4, ports) < 1) {
    return absl::UnavailableError(StrCat("no listening port for ", gw->options_.listen));
  }
  gw->port_ = ports[0].port;
  gw->started_.store(true);
  mg_set_request_handler(gw->ctx_, "**", &Gateway::Dispatch, gw.get());
  return gw;
}

void Gateway::StartDrain() { draining_.store(true, std::memory_order_release); }

Gateway::~Gateway() {
  stopping_.store(true);
  if (ctx_ != nullptr) mg_stop(ctx_);
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

int Gateway::Dispatch(mg_connection* conn, void* self) {
  auto* gw = static_cast<Gateway*>(self);
  const absl::Time start = absl::Now();
  const mg_request_info* info = mg_get_request_info(conn);
  const std::string uri = info->local_uri != nullptr ? info->local_uri : "";
  t_framed_response = false;
  if (!gw->keep_alive_.MayKeepOpen(info->content_length,
                                   mg_get_header(conn, "Transfer-Encoding") != nullptr,
                                   static_cast<int64_t>(gw->options_.max_body_bytes))) {
    mg_disable_connection_keep_alive(conn);
  }
  int code;
  if (std::optional<ApiError> denied = gw->auth_.Check(uri, mg_get_header(conn, "Authorization"))) {
    mg_disable_connection_keep_alive(conn);  // its body unread; no idle connection without the key
    code = SendBody(conn, denied->http_status, "application/json", Dump(ErrorJson(*denied)) + '\n',
                    "Bearer");
  } else {
    code = gw->Route(conn, uri, info->request_method);
  }
  // A streamed response has no Content-Length: the connection's end is its end.
  if (!t_framed_response) mg_disable_connection_keep_alive(conn);
  gw->metrics_.Request(uri, code, absl::Now() - start);
  return code;
}

int Gateway::Route(mg_connection* conn, const std::string& uri, std::string_view method) {
  ApiError wrong_method;
  wrong_method.http_status = 405;
  if (uri == "/v1/chat/completions" || uri == "/v1/completions") {
    if (method != "POST") {
      wrong_method.message = StrCat("use POST for ", uri);
      return SendError(conn, wrong_method);
    }
    // Counted from here, so that a drain waits for a request that has passed
    // the check below however far it has got.
    in_flight_.fetch_add(1, std::memory_order_acq_rel);
    struct Leave {
      std::atomic<int>& n;
      ~Leave() { n.fetch_sub(1, std::memory_order_acq_rel); }
    } leave{in_flight_};
    if (draining_.load(std::memory_order_acquire)) {
      ApiError e;
      e.http_status = 503;
      e.type = "server_error";
      e.code = "service_unavailable";
      e.message = "the gateway is shutting down (draining): retry on another replica";
      return SendError(conn, e);
    }
    return uri == "/v1/completions" ? HandleCompletions(conn) : HandleChat(conn);
  }
  if (uri == "/v1/models" || absl::StartsWith(uri, "/v1/models/")) {
    if (method == "GET") return HandleModels(conn, uri);
    wrong_method.message = "use GET for /v1/models";
    return SendError(conn, wrong_method);
  }
  if (uri == "/health") {
    if (method == "GET" || method == "HEAD") return HandleHealth(conn);
    wrong_method.message = "use GET for /health";
    return SendError(conn, wrong_method);
  }
  if (uri == "/metrics") {
    if (method == "GET") {
      return SendBody(conn, 200, "text/plain; version=0.0.4; charset=utf-8", metrics_.Text());
    }
    wrong_method.message = "use GET for /metrics";
    return SendError(conn, wrong_method);
  }
  if (uri == "/tokenize" || uri == "/detokenize") {
    if (method == "POST") return HandleTokenize(conn, uri == "/detokenize");
    wrong_method.message = StrCat("use POST for ", uri);
    return SendError(conn, wrong_method);
  }
  return SendError(conn, NotFound(StrCat("no such endpoint: ", method, " ", uri)));
}

int Gateway::HandleTokenize(mg_connection* conn, bool detokenize) {
  std::string body;
  if (auto e = ReadBody(conn, options_.max_body_bytes, &body)) return SendError(conn, *e);
  TokenizeRequest tokenize;
  DetokenizeRequest detokenize_req;
  std::optional<ApiError> parse_error =
      detokenize ? ParseDetokenizeRequest(body, &detokenize_req)
                 : ParseTokenizeRequest(body, options_.limits, &tokenize);
  if (parse_error) return SendError(conn, *parse_error);
  const std::optional<std::string>& model = detokenize ? detokenize_req.model : tokenize.model;
  if (model.has_value() && *model != model_id_) {
    ApiError e = NotFound(StrCat("the model ", QuoteForError(*model), " does not exist"));
    e.param = "model";
    e.code = "model_not_found";
    return SendError(conn, e);
  }
  for (const int32_t id : detokenize_req.tokens) {
    if (id >= vocab_size_) {
      return SendError(conn, BadParam("tokens", StrCat("token ", id, " is not in the ", vocab_size_,
                                                       "-token vocabulary")));
    }
  }
  // A chat: rendered as HandleChat renders it (and encoded as it encodes it,
  // BOS on top of the template's only with add_special_tokens).
  std::string prompt = std::move(tokenize.prompt);
  client::EncodeOptions encode;
  encode.allow_special = tokenize.add_special_tokens;
  encode.add_bos = tokenize.add_special_tokens && add_bos_;
  if (!tokenize.messages.empty()) {
    absl::StatusOr<std::string> rendered =
        RenderChat(template_, tokenize.messages, tokenize.add_generation_prompt);
    if (!rendered.ok()) {
      return SendError(conn, BadParam("messages", StrCat("the model's chat template: ",
                                                         rendered.status().message())));
    }
    prompt = *std::move(rendered);
    encode.allow_special = true;
    encode.add_bos = add_bos_ && (tokenize.add_special_tokens ||
                                  template_.kind() == client::ChatTemplate::Kind::kRaw);
  }
  absl::StatusOr<GeneratorPool::Lease> lease = pool_.Acquire();
  if (!lease.ok()) return SendError(conn, FromStatus(lease.status()));
  if (detokenize) {
    absl::StatusOr<std::string> text = (*lease)->Decode(detokenize_req.tokens);
    if (!text.ok()) return SendError(conn, FromStatus(text.status()));
    return SendJson(conn, 200, json{{"prompt", *text}});
  }
  absl::StatusOr<std::vector<int32_t>> encoded = (*lease)->Encode(prompt, encode);
  if (!encoded.ok()) return SendError(conn, FromStatus(encoded.status()));
  return SendJson(
      conn, 200,
      json{{"tokens", *encoded}, {"count", encoded->size()}, {"max_model_len", context_length_}});
}

int Gateway::HandleModels(mg_connection* conn, const std::string& uri) {
  const json model{{"id", model_id_},
                   {"object", "model"},
                   {"created", created_},
                   {"owned_by", "llm"},
                   {"context_length", context_length_}};
  if (uri == "/v1/models") {
    return SendJson(conn, 200, json{{"object", "list"}, {"data", json::array({model})}});
  }
  const std::string id = uri.substr(std::string_view("/v1/models/").size());
  if (id != model_id_) {
    ApiError e = NotFound(StrCat("the model '", id, "' does not exist"));
    e.param = "model";
    e.code = "model_not_found";
    return SendError(conn, e);
  }
  return SendJson(conn, 200, model);
}

int Gateway::HandleHealth(mg_connection* conn) {
  const client::ClientOptions& o = options_.client;
  const std::string tokenizer =
      ServingState(o, o.tokenizer_address, client::kTokenizerServiceName, options_.health_timeout);
  json models = json::object();
  bool model_ok = false;
  absl::StatusOr<client::ModelTarget> target = client::ParseModelTarget(o.model_address);
  absl::StatusOr<std::vector<std::string>> replicas =
      target.ok() ? client::TargetAddresses(*target)
                  : absl::StatusOr<std::vector<std::string>>(target.status());
  if (!replicas.ok()) {
    models[o.model_address] = std::string(replicas.status().message());
  } else {
    for (const std::string& address : *replicas) {
      const std::string state =
          ServingState(o, address, client::kModelServiceName, options_.health_timeout);
      model_ok = model_ok || state == "SERVING";
      models[address] = state;
    }
  }
  const bool draining = draining_.load(std::memory_order_acquire);
  const bool ok = tokenizer == "SERVING" && model_ok && !draining;
  return SendJson(conn, ok ? 200 : 503,
                  json{{"status", ok         ? "ok"
                                  : draining ? "draining"
                                             : "unavailable"},
                       {"tokenizer", {{o.tokenizer_address, tokenizer}}},
                       {"model", models}});
}

// Checks what chat and completions share against the served model.
std::optional<ApiError> Gateway::CheckModel(const GenerationRequest& req) const {
  if (req.model != model_id_) {
    ApiError e = NotFound(StrCat("the model ", QuoteForError(req.model),
                                 " does not exist (this gateway serves '", model_id_, "')"));
    e.param = "model";
    e.code = "model_not_found";
    return e;
  }
  for (const sampler::LogitBias& b : req.params.sampling.logit_bias) {
    if (b.id >= vocab_size_) {
      return BadParam("logit_bias",
                      StrCat("token ", b.id, " is not in the ", vocab_size_, "-token vocabulary"));
    }
  }
  return std::nullopt;
}

std::optional<ApiError> Gateway::CheckPromptLength(int64_t tokens, std::string_view param) const {
  if (tokens < context_length_) return std::nullopt;
  ApiError e =
      BadParam(param, StrCat("the prompt is ", tokens, " tokens; the model's context holds ",
                             context_length_, " (and the answer must fit too)"));
  e.code = "context_length_exceeded";
  return e;
}

int Gateway::HandleChat(mg_connection* conn) {
  const absl::Time arrival = absl::Now();
  std::string body;
  if (auto e = ReadBody(conn, options_.max_body_bytes, &body)) return SendError(conn, *e);
  ChatRequest req;
  if (auto e = ParseChatRequest(body, options_.limits, &req)) return SendError(conn, *e);
  if (auto e = CheckModel(req)) return SendError(conn, *e);
  // A conversation that keeps its model session (X-Session-Id).
  std::optional<Conversations::Lease> conversation;
  if (const char* header = mg_get_header(conn, "X-Session-Id"); header != nullptr) {
    if (absl::Status s = CheckConversationId(header); !s.ok()) {
      return SendError(conn, BadParam("x-session-id", std::string(s.message())));
    }
    if (req.n != 1)
      return SendError(conn, BadParam("n", "a conversation (X-Session-Id) needs n = 1"));
    absl::StatusOr<Conversations::Lease> taken = conversations_.Take(header);
    if (!taken.ok()) {
      ApiError e;
      e.http_status = 409;
      e.message = std::string(taken.status().message());
      e.param = "x-session-id";
      e.code = "session_busy";
      return SendError(conn, e);
    }
    conversation.emplace(*std::move(taken));
  }
  // The prompt's text.
  std::string prompt;
  if (template_.kind() == client::ChatTemplate::Kind::kJinja) {
    absl::StatusOr<std::string> rendered = template_.Render(req.messages, true);
    if (!rendered.ok()) {
      return SendError(conn, BadParam("messages", StrCat("the model's chat template: ",
                                                         rendered.status().message())));
    }
    prompt = *std::move(rendered);
  } else {
    prompt = template_.FormatTurn(req.messages, /*first=*/true);
  }

  absl::StatusOr<GeneratorPool::Lease> lease = pool_.Acquire();
  if (!lease.ok()) return SendError(conn, FromStatus(lease.status()));
  client::EncodeOptions encode;
  encode.allow_special = true;
  encode.add_bos = template_.kind() == client::ChatTemplate::Kind::kRaw && add_bos_;
  absl::StatusOr<std::vector<int32_t>> ids = (*lease)->Encode(prompt, encode);
  if (!ids.ok()) {
    lease->Discard();
    return SendError(conn, FromStatus(ids.status()));
  }
  if (auto e = CheckPromptLength(static_cast<int64_t>(ids->size()), "messages")) {
    return SendError(conn, *e);
  }
  ResponseInfo info{NewId("chatcmpl-"), static_cast<int64_t>(std::time(nullptr)), model_id_,
                    req.stream, req.include_usage};
  std::unique_ptr<ChoiceWriter> writer =
      NewChatWriter(std::move(info), req.logprobs, TextOf(**lease));
  std::vector<PromptIds> prompts(1);
  prompts[0].ids = *std::move(ids);
  if (!conversation.has_value()) return Serve(conn, arrival, req, prompts, *writer, *lease);
  client::Session& session = conversation->session();
  prompts[0].cached = ReuseSession(**lease, prompts[0].ids, session);
  for (client::Session& dropped : conversations_.TakeDropped()) {
    (*lease)->Release(dropped).IgnoreError();
  }
  return Serve(conn, arrival, req, prompts, *writer, *lease, &session);
}

size_t Gateway::ReuseSession(client::Generator& g, const std::vector<int32_t>& ids,
                             client::Session& session) {
  // The new prompt continues what the session holds up to their longest
  // common prefix (a template may render the last answer slightly otherwise
  // than it was generated, e.g. without a stop string): keep that, and at
  // least one token to prefill.
  size_t common = 0;
  while (common < session.tokens.size() && common < ids.size() &&
         session.tokens[common] == ids[common]) {
    ++common;
  }
  common = std::min(common, ids.size() - 1);
  if (common < session.tokens.size() || !session.pending.empty() || session.unsynced) {
    if (!g.Truncate(session, static_cast<int64_t>(common)).ok()) {
      g.Release(session).IgnoreError();  // start over in a new session
      return 0;
    }
  }
  return common;
}

int Gateway::HandleCompletions(mg_connection* conn) {
  const absl::Time arrival = absl::Now();
  std::string body;
  if (auto e = ReadBody(conn, options_.max_body_bytes, &body)) return SendError(conn, *e);
  CompletionRequest req;
  if (auto e = ParseCompletionRequest(body, options_.limits, &req)) return SendError(conn, *e);
  if (auto e = CheckModel(req)) return SendError(conn, *e);
  if (!req.has_max_tokens) req.params.max_tokens = 16;  // OpenAI's default for completions

  absl::StatusOr<GeneratorPool::Lease> lease = pool_.Acquire();
  if (!lease.ok()) return SendError(conn, FromStatus(lease.status()));
  client::Generator& g = **lease;
  // Text is encoded as /tokenize does by default (special-token text read as
  // the token, BOS when the vocabulary adds one), as vLLM does.
  client::EncodeOptions encode;
  encode.allow_special = true;
  encode.add_bos = add_bos_;
  std::vector<PromptIds> prompts(req.prompts.size());
  for (size_t i = 0; i < req.prompts.size(); ++i) {
    CompletionPrompt& in = req.prompts[i];
    PromptIds& out = prompts[i];
    const std::string param = req.prompts.size() == 1 ? "prompt" : StrCat("prompt[", i, "]");
    if (in.is_ids) {
      for (int32_t id : in.ids) {
        if (id >= vocab_size_) {
          return SendError(conn, BadParam(param, StrCat("token ", id, " is not in the ",
                                                        vocab_size_, "-token vocabulary")));
        }
      }
      out.ids = std::move(in.ids);
      if (req.echo) {
        absl::StatusOr<std::string> text = g.Decode(out.ids);
        if (!text.ok()) return SendError(conn, FromStatus(text.status()));
        out.text = *std::move(text);
      }
    } else {
      absl::StatusOr<std::vector<int32_t>> ids = g.Encode(in.text, encode);
      if (!ids.ok()) {
        lease->Discard();
        return SendError(conn, FromStatus(ids.status()));
      }
      if (ids->empty()) return SendError(conn, BadParam(param, "the prompt has no tokens"));
      out.ids = *std::move(ids);
      out.text = std::move(in.text);
    }
    if (auto e = CheckPromptLength(static_cast<int64_t>(out.ids.size()), param)) {
      return SendError(conn, *e);
    }
  }
  ResponseInfo info{NewId("cmpl-"), static_cast<int64_t>(std::time(nullptr)), model_id_, req.stream,
                    req.include_usage};
  std::unique_ptr<ChoiceWriter> writer =
      NewCompletionWriter(std::move(info), req.echo, req.logprobs, TextOf(g));
  return Serve(conn, arrival, req, prompts, *writer, *lease);
}

TokenText Gateway::TextOf(client::Generator& g) {
  return [&g](int32_t id) {
    absl::StatusOr<std::string> bytes = g.TokenBytes(id);
    return bytes.ok() ? *std::move(bytes) : std::string();
  };
}

int Gateway::Serve(mg_connection* conn, absl::Time arrival, GenerationRequest& req,
                   const std::vector<PromptIds>& prompts, ChoiceWriter& writer,
                   GeneratorPool::Lease& lease, client::Session* conversation) {
  client::Generator& g = *lease;
  const int32_t max_tokens = req.params.max_tokens;  // 0: the rest of the context
  const uint64_t seed = req.has_seed ? req.params.sampling.seed : RandomSeed();
  if (!req.has_speculate) req.params.speculate = options_.speculate;
  int64_t prompt_tokens = 0, cached_tokens = 0;
  int64_t proposed_tokens = 0, accepted_tokens = 0;  // speculation
  for (const PromptIds& p : prompts) {
    prompt_tokens += static_cast<int64_t>(p.ids.size());
    cached_tokens += static_cast<int64_t>(p.cached);
  }
  // OpenAI's usage.prompt_tokens_details.cached_tokens: the prompt tokens a
  // conversation's session held already, and those the model server found
  // in its prefix cache.
  const auto with_cached = [&](json j) {
    if (j.contains("usage") && j["usage"].is_object()) {
      j["usage"]["prompt_tokens_details"] = {{"cached_tokens", cached_tokens}};
      // Speculation's proposals, in the fields OpenAI's predicted outputs use.
      if (proposed_tokens > 0) {
        j["usage"]["completion_tokens_details"] = {
            {"accepted_prediction_tokens", accepted_tokens},
            {"rejected_prediction_tokens", proposed_tokens - accepted_tokens}};
      }
    }
    return j;
  };
  int64_t completion_tokens = 0;
  metrics_.active().Increment();
  bool first_token = true;
  struct Done {  // counts the request's tokens and ends it as active, however it returns
    GatewayMetrics& m;
    const int64_t& prompt;
    const int64_t& completion;
    ~Done() {
      m.Tokens(prompt, completion);
      m.active().Decrement();
    }
  } done{metrics_, prompt_tokens, completion_tokens};

  {
    client::GenerateParams check = req.params;  // max_tokens is set per prompt below
    check.max_tokens = 1;
    if (absl::Status s = client::ValidateParams(check); !s.ok()) {
      return SendError(conn, FromStatus(s));
    }
  }
  if (req.stream) {
    mg_printf(conn,
              "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
              "X-Accel-Buffering: no\r\nConnection: close\r\n\r\n");
  }
  bool alive = true;  // the client still reads the stream
  ChoiceWriter::Events events;
  const auto send_events = [&] {
    for (const json& j : events) {
      if (alive && !WriteAll(conn, StrCat("data: ", Dump(j), "\n\n"))) alive = false;
    }
    events.clear();
    return alive;
  };
  bool cancelled = false;
  for (size_t p = 0; p < prompts.size() && alive && !cancelled; ++p) {
    const PromptIds& prompt = prompts[p];
    const int32_t room = static_cast<int32_t>(context_length_ - prompt.ids.size());
    req.params.max_tokens =
        max_tokens == 0 && !req.has_max_tokens ? room : std::min(max_tokens, room);
    for (int j = 0; j < req.n && alive && !cancelled; ++j) {
      const int index = static_cast<int>(p) * req.n + j;
      req.params.sampling.seed = seed + static_cast<uint64_t>(index);
      writer.Begin(index, {prompt.ids, prompt.text}, &events);
      send_events();
      absl::StatusOr<client::GenerateResult> result;
      if (req.params.max_tokens == 0) {  // echo only: score the prompt
        absl::StatusOr<client::PrefillResult> scored =
            g.Score(prompt.ids, std::max(req.params.prompt_logprobs, 0));
        if (scored.ok()) {
          client::GenerateResult r;
          r.prompt_logprobs = std::move(scored->prompt_logprobs);
          result = std::move(r);
        } else {
          result = scored.status();
        }
      } else {
        client::Session fresh;
        client::Session& session = conversation != nullptr ? *conversation : fresh;
        const auto on_token = [&](const client::TokenEvent& e) {
          if (first_token) {
            metrics_.FirstToken(absl::Now() - arrival);
            first_token = false;
          }
          if (stopping_.load(std::memory_order_relaxed)) g.Cancel();
          if (!alive) return;
          writer.Token(index, e, &events);
          // Nothing to send: a comment, to notice a client gone.
          const bool ok = events.empty() && req.stream ? WriteAll(conn, ": \n\n") : send_events();
          if (!ok) {
            alive = false;
            g.Cancel();
          }
        };
        result =
            g.Generate(session, std::span(prompt.ids).subspan(prompt.cached), req.params, on_token);
        if (conversation == nullptr) g.Release(session).IgnoreError();
      }
      if (!result.ok()) {
        lease.Discard();
        const ApiError e = FromStatus(result.status());
        if (!req.stream) return SendError(conn, e);
        if (alive) WriteAll(conn, StrCat("data: ", Dump(ErrorJson(e)), "\n\n"));
        return 200;
      }
      completion_tokens += static_cast<int64_t>(result->tokens.size());
      if (j == 0) cached_tokens += result->cached_tokens;  // the prompt counts once
      proposed_tokens += result->proposed_tokens;
      accepted_tokens += result->accepted_tokens;
      if (result->stop_reason == client::StopReason::kCancelled) {
        cancelled = true;
        break;
      }
      writer.End(index, *result, &events);
      send_events();
    }
  }
  if (!req.stream) {
    if (cancelled) {  // by shutdown
      ApiError e;
      e.http_status = 503;
      e.type = "server_error";
      e.message = "the gateway is shutting down";
      return SendError(conn, e);
    }
    return SendJson(conn, 200, with_cached(writer.Response(prompt_tokens, completion_tokens)));
  }
  if (alive && !cancelled && req.include_usage) {
    events.push_back(with_cached(writer.UsageChunk(prompt_tokens, completion_tokens)));
    send_events();
  }
  if (alive && !cancelled) WriteAll(conn, "data: [DONE]\n\n");
  return 200;
}

}  // namespace llm::gateway
