#include "gateway/handler.h"

#include <ctime>
#include <random>
#include <span>
#include <utility>

#include "absl/strings/match.h"
#include "common/strings.h"
#include "gateway/anthropic_api.h"
#include "gateway/event_stream.h"
#include "gateway/model_id.h"

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
    case absl::StatusCode::kAborted:  // a session busy with another request (a conversation's)
      e.http_status = 409;
      e.code = "session_busy";
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

ApiError Unavailable(std::string message) {
  ApiError e;
  e.http_status = 503;
  e.type = "server_error";
  e.code = "service_unavailable";
  e.message = std::move(message);
  return e;
}

int SendJson(HttpExchange& http, int status, const json& body,
             std::span<const HttpHeader> headers = {}) {
  http.Respond(status, "application/json", Dump(body) + '\n', headers);
  return status;
}

// The error object in `api`'s shape.
json ErrorBody(const ApiError& e, ChatApi api) {
  return api == ChatApi::kAnthropic ? AnthropicErrorJson(e) : ErrorJson(e);
}

// A 429 says when to come back (RFC 9110's Retry-After, in seconds): the
// queue moves as fast as generations end, about a second here.
int SendError(HttpExchange& http, const ApiError& e, ChatApi api = ChatApi::kOpenAi) {
  static constexpr HttpHeader kRetryAfter[] = {{"Retry-After", "1"}};
  return SendJson(http, e.http_status, ErrorBody(e, api),
                  e.http_status == 429 ? std::span<const HttpHeader>(kRetryAfter)
                                       : std::span<const HttpHeader>());
}

bool IsAnthropicPath(std::string_view path) { return path.starts_with("/v1/messages"); }

ApiError NotFound(std::string_view what) {
  ApiError e;
  e.http_status = 404;
  e.message = std::string(what);
  e.code = "not_found";
  return e;
}

ApiError WrongMethod(std::string message) {
  ApiError e;
  e.http_status = 405;
  e.message = std::move(message);
  return e;
}

std::string NewId(std::string_view prefix) {
  thread_local std::mt19937_64 rng(std::random_device{}());
  char hex[33];
  std::snprintf(hex, sizeof(hex), "%016llx%016llx", static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng()));
  return StrCat(prefix, std::string_view(hex, 24));
}

// A conversation's prompt text with `t`: a Jinja template renders the whole
// conversation; a written-out one formats it as the first turn, whose
// assistant header is dropped without add_generation_prompt.
absl::StatusOr<std::string> RenderChat(const client::ChatTemplate& t,
                                       std::span<const client::ChatMessage> messages,
                                       bool add_generation_prompt, std::string_view tools_json) {
  if (t.kind() == client::ChatTemplate::Kind::kJinja) {
    return t.Render(messages, add_generation_prompt, tools_json);
  }
  std::string text = t.FormatTurn(messages, /*first=*/true);
  if (!add_generation_prompt) {
    const std::string header = t.FormatTurn({}, /*first=*/false);
    if (absl::EndsWith(text, header)) text.resize(text.size() - header.size());
  }
  return text;
}

// A Leave-on-scope-exit count of the requests being handled.
struct InFlight {
  explicit InFlight(std::atomic<int>& n) : n(n) { n.fetch_add(1, std::memory_order_acq_rel); }
  ~InFlight() { n.fetch_sub(1, std::memory_order_acq_rel); }
  std::atomic<int>& n;
};

}  // namespace

Handler::Handler(HandlerOptions options, std::shared_ptr<client::Services> services,
                 client::ChatTemplate chat_template, HealthCheck health)
    : options_(std::move(options)),
      services_(std::move(services)),
      template_(std::move(chat_template)),
      health_(std::move(health)),
      auth_(options_.http_auth_token),
      model_id_(options_.served_model_name.empty()
                    ? DefaultModelId(services_->model_info().file_name(),
                                     services_->model_info().name(),
                                     services_->model_info().architecture())
                    : options_.served_model_name),
      context_length_(services_->model_info().context_length()),
      vocab_size_(services_->model_info().vocab_size()),
      add_bos_(services_->tokenizer_info().add_bos()),
      tool_format_(client::DetectToolFormat(template_)),
      default_system_(template_.kind() == client::ChatTemplate::Kind::kJinja
                          ? client::ExtractChatMlDefaultSystem(template_.source())
                          : template_.default_system()),
      created_(static_cast<int64_t>(std::time(nullptr))),
      admission_(options_.admission),
      metrics_(model_id_) {
  for (const v1::SpecialToken& t : services_->tokenizer_info().special_tokens()) {
    if (t.kind() == "control") control_tokens_.emplace(t.text(), static_cast<int32_t>(t.id()));
  }
}

void Handler::Stop() {
  stopping_.store(true, std::memory_order_release);
  admission_.Stop();
}

int Handler::Handle(HttpExchange& http) {
  const absl::Time start = absl::Now();
  int code;
  std::optional<std::string> authorization;
  if (const std::optional<std::string_view> h = http.header("Authorization")) {
    authorization.emplace(*h);
  } else if (const std::optional<std::string_view> key = http.header("x-api-key")) {
    authorization = StrCat("Bearer ", *key);  // the key as Anthropic's clients send it
  }
  const std::string path(http.path());
  if (std::optional<ApiError> denied =
          auth_.Check(path, authorization.has_value() ? authorization->c_str() : nullptr)) {
    static constexpr HttpHeader kChallenge[] = {{"WWW-Authenticate", "Bearer"}};
    http.CloseAfterResponse();  // its body unread; no idle connection without the key
    code =
        SendJson(http, denied->http_status,
                 ErrorBody(*denied, IsAnthropicPath(path) ? ChatApi::kAnthropic : ChatApi::kOpenAi),
                 kChallenge);
  } else {
    code = Route(http);
  }
  metrics_.Request(path, code, absl::Now() - start);
  return code;
}

int Handler::HandleAdmin(HttpExchange& http) {
  const absl::Time start = absl::Now();
  const std::string path(http.path());
  int code;
  if (path == "/health" || path == "/metrics") {
    code = Route(http);
  } else {
    code = SendError(http, NotFound(StrCat("the admin listener serves GET /health and /metrics "
                                           "only; the API is on --listen")));
  }
  metrics_.Request(path, code, absl::Now() - start);
  return code;
}

int Handler::Route(HttpExchange& http) {
  const std::string_view method = http.method();
  const std::string path(http.path());
  if (path == "/v1/chat/completions" || path == "/v1/completions" || path == "/v1/messages") {
    const ChatApi api = path == "/v1/messages" ? ChatApi::kAnthropic : ChatApi::kOpenAi;
    if (method != "POST") return SendError(http, WrongMethod(StrCat("use POST for ", path)), api);
    // Counted from here, so that a drain waits for a request that has passed
    // the check below however far it has got.
    InFlight counted(in_flight_);
    if (draining_.load(std::memory_order_acquire)) {
      return SendError(
          http, Unavailable("the gateway is shutting down (draining): retry on another replica"),
          api);
    }
    if (path == "/v1/messages") return HandleMessages(http, /*count_tokens=*/false);
    return path == "/v1/completions" ? HandleCompletions(http) : HandleChat(http);
  }
  if (path == "/v1/messages/count_tokens") {
    if (method != "POST") {
      return SendError(http, WrongMethod(StrCat("use POST for ", path)), ChatApi::kAnthropic);
    }
    return HandleMessages(http, /*count_tokens=*/true);
  }
  if (path == "/v1/models" || absl::StartsWith(path, "/v1/models/")) {
    if (method == "GET") return HandleModels(http);
    return SendError(http, WrongMethod("use GET for /v1/models"));
  }
  if (path == "/health") {
    if (method == "GET" || method == "HEAD") return HandleHealth(http);
    return SendError(http, WrongMethod("use GET for /health"));
  }
  if (path == "/metrics") {
    if (method == "GET") {
      if (options_.prefix_routed) metrics_.PrefixRouted(options_.prefix_routed());
      http.Respond(200, "text/plain; version=0.0.4; charset=utf-8", metrics_.Text());
      return 200;
    }
    return SendError(http, WrongMethod("use GET for /metrics"));
  }
  if (path == "/tokenize" || path == "/detokenize") {
    if (method == "POST") return HandleTokenize(http, path == "/detokenize");
    return SendError(http, WrongMethod(StrCat("use POST for ", path)));
  }
  return SendError(http, NotFound(StrCat("no such endpoint: ", QuoteForError(method), " ",
                                         QuoteForError(path))));
}

std::optional<ApiError> Handler::ReadBody(HttpExchange& http, std::string* body) const {
  const size_t limit = options_.max_body_bytes;
  ApiError too_large;
  too_large.http_status = 413;
  too_large.message = StrCat("the request body is larger than ", limit, " bytes");
  const int64_t length = http.content_length();
  if (length > 0 && static_cast<uint64_t>(length) > limit) return too_large;
  const absl::Time give_up = absl::Now() + options_.body_timeout;
  char buf[16384];
  while (true) {
    const int n = http.Read(buf, sizeof(buf));
    if (n == 0) break;
    if (n < 0 || absl::Now() > give_up) {
      ApiError slow;
      slow.http_status = 408;
      slow.message = StrCat("the request body did not arrive (", body->size(), " of ",
                            length < 0 ? std::string("?") : std::to_string(length),
                            " bytes within ", absl::FormatDuration(options_.body_timeout), ")");
      return slow;
    }
    body->append(buf, static_cast<size_t>(n));
    if (body->size() > limit) return too_large;
  }
  return std::nullopt;
}

absl::StatusOr<Admission::Ticket> Handler::Admit() {
  metrics_.queued().Increment();
  absl::StatusOr<Admission::Ticket> ticket = admission_.Enter();
  metrics_.queued().Decrement();
  if (ticket.ok()) {
    metrics_.QueueWait(ticket->waited());
  } else if (absl::IsResourceExhausted(ticket.status())) {
    metrics_.Rejected();
  }
  return ticket;
}

int Handler::HandleTokenize(HttpExchange& http, bool detokenize) {
  std::string body;
  if (auto e = ReadBody(http, &body)) return SendError(http, *e);
  TokenizeRequest tokenize;
  DetokenizeRequest detokenize_req;
  std::optional<ApiError> parse_error =
      detokenize ? ParseDetokenizeRequest(body, &detokenize_req)
                 : ParseTokenizeRequest(body, options_.limits, &tokenize);
  if (parse_error) return SendError(http, *parse_error);
  const std::optional<std::string>& model = detokenize ? detokenize_req.model : tokenize.model;
  if (model.has_value() && *model != model_id_) {
    ApiError e = NotFound(StrCat("the model ", QuoteForError(*model), " does not exist"));
    e.param = "model";
    e.code = "model_not_found";
    return SendError(http, e);
  }
  for (const int32_t id : detokenize_req.tokens) {
    if (id >= vocab_size_) {
      return SendError(http, BadParam("tokens", StrCat("token ", id, " is not in the ", vocab_size_,
                                                       "-token vocabulary")));
    }
  }
  client::TokenizerPort& tokenizer = services_->tokenizer();
  if (detokenize) {
    absl::StatusOr<std::string> text = tokenizer.Decode(detokenize_req.tokens);
    if (!text.ok()) return SendError(http, FromStatus(text.status()));
    return SendJson(http, 200, json{{"prompt", *text}});
  }
  // A chat: rendered as HandleChat renders it (and encoded as it encodes it,
  // BOS on top of the template's only with add_special_tokens).
  std::string prompt = std::move(tokenize.prompt);
  client::EncodeOptions encode;
  encode.allow_special = tokenize.add_special_tokens;
  encode.add_bos = tokenize.add_special_tokens && add_bos_;
  if (!tokenize.messages.empty()) {
    ChatRequest chat;
    chat.messages = std::move(tokenize.messages);
    ChatToolPlan plan;
    if (auto e =
            RenderPrompt(chat, tokenize.add_generation_prompt, ChatApi::kOpenAi, &prompt, &plan)) {
      return SendError(http, *e);
    }
    encode.allow_special = true;
    encode.add_bos = add_bos_ && (tokenize.add_special_tokens ||
                                  template_.kind() == client::ChatTemplate::Kind::kRaw);
  }
  absl::StatusOr<std::vector<int32_t>> encoded = tokenizer.Encode(prompt, encode);
  if (!encoded.ok()) return SendError(http, FromStatus(encoded.status()));
  return SendJson(
      http, 200,
      json{{"tokens", *encoded}, {"count", encoded->size()}, {"max_model_len", context_length_}});
}

int Handler::HandleModels(HttpExchange& http) {
  const json model{{"id", model_id_},
                   {"object", "model"},
                   {"created", created_},
                   {"owned_by", "llm"},
                   {"context_length", context_length_}};
  const std::string_view path = http.path();
  if (path == "/v1/models") {
    return SendJson(http, 200, json{{"object", "list"}, {"data", json::array({model})}});
  }
  const std::string_view id = path.substr(std::string_view("/v1/models/").size());
  if (id != model_id_) {
    ApiError e = NotFound(StrCat("the model ", QuoteForError(id), " does not exist"));
    e.param = "model";
    e.code = "model_not_found";
    return SendError(http, e);
  }
  return SendJson(http, 200, model);
}

int Handler::HandleHealth(HttpExchange& http) {
  const ServiceHealth health = health_();
  json tokenizer = json::object();
  json models = json::object();
  bool tokenizer_ok = !health.tokenizer.empty();
  bool model_ok = false;
  for (const auto& [address, state] : health.tokenizer) {
    tokenizer[address] = state;
    tokenizer_ok = tokenizer_ok && state == "SERVING";
  }
  for (const auto& [address, state] : health.model) {
    models[address] = state;
    model_ok = model_ok || state == "SERVING";
  }
  const bool draining = draining_.load(std::memory_order_acquire);
  const bool ok = tokenizer_ok && model_ok && !draining;
  return SendJson(http, ok ? 200 : 503,
                  json{{"status", ok         ? "ok"
                                  : draining ? "draining"
                                             : "unavailable"},
                       {"tokenizer", tokenizer},
                       {"model", models}});
}

// Checks what chat and completions share against the served model.
std::optional<ApiError> Handler::CheckModel(const GenerationRequest& req) const {
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

std::optional<ApiError> Handler::Constrain(GenerationRequest& req) {
  if (!req.constraint.has_value()) return std::nullopt;
  absl::StatusOr<std::shared_ptr<const constrain::Constraint>> c =
      services_->CompileConstraint(*req.constraint);
  if (!c.ok()) {
    ApiError e = FromStatus(c.status());
    e.message = StrCat(req.constraint_param, " (", constrain::KindName(req.constraint->kind),
                       "): ", c.status().message());
    if (e.http_status == 400) e.param = req.constraint_param;
    return e;
  }
  req.params.constraint = *std::move(c);
  return std::nullopt;
}

std::optional<ApiError> Handler::CheckPromptLength(int64_t tokens, std::string_view param) const {
  if (tokens < context_length_) return std::nullopt;
  ApiError e =
      BadParam(param, StrCat("the prompt is ", tokens, " tokens; the model's context holds ",
                             context_length_, " (and the answer must fit too)"));
  e.code = "context_length_exceeded";
  return e;
}

TokenText Handler::TextOf() const {
  return [tokenizer = &services_->tokenizer()](int32_t id) {
    absl::StatusOr<std::string> bytes = tokenizer->TokenBytes(id);
    return bytes.ok() ? *std::move(bytes) : std::string();
  };
}

int Handler::HandleChat(HttpExchange& http) {
  const absl::Time arrival = absl::Now();
  std::string body;
  if (auto e = ReadBody(http, &body)) return SendError(http, *e);
  ChatRequest req;
  if (auto e = ParseChatRequest(body, options_.limits, &req)) return SendError(http, *e);
  return ServeChat(http, arrival, req, ChatApi::kOpenAi);
}

int Handler::HandleMessages(HttpExchange& http, bool count_tokens) {
  const absl::Time arrival = absl::Now();
  constexpr ChatApi kApi = ChatApi::kAnthropic;
  std::string body;
  if (auto e = ReadBody(http, &body)) return SendError(http, *e, kApi);
  AnthropicRequest req;
  if (auto e = ParseAnthropicRequest(body, options_.limits, count_tokens, &req)) {
    return SendError(http, *e, kApi);
  }
  if (!count_tokens) return ServeChat(http, arrival, req.chat, kApi, req.prefill);
  // count_tokens: the prompt this request would prefill, tools included.
  if (auto e = CheckModel(req.chat)) return SendError(http, *e, kApi);
  std::string prompt;
  ChatToolPlan plan;
  if (auto e = RenderPrompt(req.chat, true, kApi, &prompt, &plan)) {
    return SendError(http, *e, kApi);
  }
  prompt += req.prefill;
  client::EncodeOptions encode;
  encode.allow_special = true;
  encode.add_bos = template_.kind() == client::ChatTemplate::Kind::kRaw && add_bos_;
  absl::StatusOr<std::vector<int32_t>> ids = services_->tokenizer().Encode(prompt, encode);
  if (!ids.ok()) return SendError(http, FromStatus(ids.status()), kApi);
  return SendJson(http, 200, json{{"input_tokens", ids->size()}});
}

std::optional<ApiError> Handler::RenderPrompt(const ChatRequest& req, bool add_generation_prompt,
                                              ChatApi api, std::string* prompt,
                                              ChatToolPlan* plan) const {
  ChatToolInput in;
  in.format = &tool_format_;
  in.tools = &req.tools;
  in.choice = req.tool_choice;
  in.messages = &req.messages;
  in.default_system = default_system_;
  in.control_token_id = [this](std::string_view text) -> std::optional<int32_t> {
    const auto it = control_tokens_.find(std::string(text));
    return it == control_tokens_.end() ? std::nullopt : std::optional<int32_t>(it->second);
  };
  in.id_prefix = api == ChatApi::kAnthropic ? "toolu_" : "call_";
  if (auto e = PlanChatTools(in, plan)) return e;
  absl::StatusOr<std::string> rendered =
      RenderChat(template_, plan->messages, add_generation_prompt, plan->tools_json);
  if (!rendered.ok()) {
    return BadParam("messages", StrCat("the model's chat template: ", rendered.status().message()));
  }
  *prompt = *std::move(rendered);
  return std::nullopt;
}

int Handler::ServeChat(HttpExchange& http, absl::Time arrival, ChatRequest& req, ChatApi api,
                       const std::string& prefill) {
  if (auto e = CheckModel(req)) return SendError(http, *e, api);
  // A conversation (X-Session-Id): a named model session (conversations.h).
  std::optional<client::Session> conversation;
  std::optional<RunningConversations::Claim> claim;
  if (const std::optional<std::string_view> header = http.header("X-Session-Id")) {
    if (absl::Status s = CheckConversationId(*header); !s.ok()) {
      return SendError(http, BadParam("x-session-id", std::string(s.message())), api);
    }
    if (req.n != 1) {
      return SendError(http, BadParam("n", "a conversation (X-Session-Id) needs n = 1"), api);
    }
    absl::StatusOr<RunningConversations::Claim> claimed = running_.Start(std::string(*header));
    if (!claimed.ok()) {
      ApiError e = FromStatus(claimed.status());
      e.param = "x-session-id";
      return SendError(http, e, api);
    }
    claim.emplace(*std::move(claimed));
    conversation.emplace();
    conversation->id = ConversationSessionName(*header);
    conversation->named = true;
  }
  // The prompt's text: the whole conversation, rendered (with the tools).
  std::string prompt;
  ChatToolPlan tools;
  if (auto e = RenderPrompt(req, true, api, &prompt, &tools)) return SendError(http, *e, api);
  prompt += prefill;
  // Tool calls follow the tools' schemas: the structural tag that keeps the
  // answer to tool_choice (required, a named function, and auto where the
  // family's calls open with a marker) constrains the generation.
  if (!tools.constraint_error.ok()) {
    ApiError e = FromStatus(tools.constraint_error);
    e.param = "tool_choice";
    return SendError(http, e, api);
  }
  if (tools.constraint.has_value()) {
    if (req.constraint.has_value()) {
      return SendError(
          http,
          BadParam(req.constraint_param,
                   StrCat(req.constraint_param, " and tool calls (tools with tool_choice ",
                          "required, a named function, or auto) cannot both constrain an answer")),
          api);
    }
    req.constraint =
        constrain::Spec{.kind = constrain::Kind::kStructuralTag, .text = *tools.constraint};
    req.constraint_param = "tools";
  }
  if (auto e = Constrain(req)) return SendError(http, *e, api);

  absl::StatusOr<Admission::Ticket> admitted = Admit();
  if (!admitted.ok()) return SendError(http, FromStatus(admitted.status()), api);
  std::optional<Admission::Ticket> ticket(*std::move(admitted));
  client::Generator g(services_);
  client::EncodeOptions encode;
  encode.allow_special = true;
  encode.add_bos = template_.kind() == client::ChatTemplate::Kind::kRaw && add_bos_;
  std::vector<PromptIds> prompts(1);
  PromptIds& p = prompts[0];
  // A conversation's whole rendering goes with sync_history: the model
  // server keeps what the named session holds of it (GenerateResult::
  // kept_tokens) and computes the rest.
  client::Session* session = conversation.has_value() ? &*conversation : nullptr;
  absl::StatusOr<std::vector<int32_t>> ids = g.Encode(prompt, encode);
  if (!ids.ok()) return SendError(http, FromStatus(ids.status()), api);
  p.ids = *std::move(ids);
  if (p.ids.empty()) return SendError(http, BadParam("messages", "the prompt has no tokens"), api);
  if (auto e = CheckPromptLength(static_cast<int64_t>(p.ids.size()), "messages")) {
    return SendError(http, *e, api);
  }
  const bool anthropic = api == ChatApi::kAnthropic;
  ResponseInfo info{NewId(anthropic ? "msg_" : "chatcmpl-"),
                    static_cast<int64_t>(std::time(nullptr)), model_id_, req.stream,
                    req.include_usage};
  std::unique_ptr<ChoiceWriter> writer =
      anthropic ? NewAnthropicWriter(std::move(info), tools.ParserFactory())
                : NewChatWriter(std::move(info), req.logprobs, TextOf(), tools.ParserFactory());
  const auto done = [&] {
    claim.reset();
    ticket.reset();
  };
  return Serve(http, arrival, req, prompts, *writer, g, done, session, api);
}

int Handler::HandleCompletions(HttpExchange& http) {
  const absl::Time arrival = absl::Now();
  std::string body;
  if (auto e = ReadBody(http, &body)) return SendError(http, *e);
  CompletionRequest req;
  if (auto e = ParseCompletionRequest(body, options_.limits, &req)) return SendError(http, *e);
  if (auto e = CheckModel(req)) return SendError(http, *e);
  if (auto e = Constrain(req)) return SendError(http, *e);
  if (!req.has_max_tokens) req.params.max_tokens = 16;  // OpenAI's default for completions

  absl::StatusOr<Admission::Ticket> admitted = Admit();
  if (!admitted.ok()) return SendError(http, FromStatus(admitted.status()));
  std::optional<Admission::Ticket> ticket(*std::move(admitted));
  client::Generator g(services_);
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
          return SendError(http, BadParam(param, StrCat("token ", id, " is not in the ",
                                                        vocab_size_, "-token vocabulary")));
        }
      }
      out.ids = std::move(in.ids);
      if (req.echo) {
        absl::StatusOr<std::string> text = g.Decode(out.ids);
        if (!text.ok()) return SendError(http, FromStatus(text.status()));
        out.text = *std::move(text);
      }
    } else {
      absl::StatusOr<std::vector<int32_t>> ids = g.Encode(in.text, encode);
      if (!ids.ok()) return SendError(http, FromStatus(ids.status()));
      if (ids->empty()) return SendError(http, BadParam(param, "the prompt has no tokens"));
      out.ids = *std::move(ids);
      out.text = std::move(in.text);
    }
    if (auto e = CheckPromptLength(static_cast<int64_t>(out.ids.size()), param)) {
      return SendError(http, *e);
    }
  }
  ResponseInfo info{NewId("cmpl-"), static_cast<int64_t>(std::time(nullptr)), model_id_, req.stream,
                    req.include_usage};
  std::unique_ptr<ChoiceWriter> writer =
      NewCompletionWriter(std::move(info), req.echo, req.logprobs, TextOf());
  return Serve(http, arrival, req, prompts, *writer, g, [&] { ticket.reset(); });
}

int Handler::Serve(HttpExchange& http, absl::Time arrival, GenerationRequest& req,
                   const std::vector<PromptIds>& prompts, ChoiceWriter& writer,
                   client::Generator& g, const std::function<void()>& done,
                   client::Session* conversation, ChatApi api) {
  // The request's parameters were validated once, by its parser
  // (openai_request.h), whose ranges are OpenAI's and within the library's
  // (ParseChatRequestTest.WhatTheParserAcceptsTheLibraryAccepts).
  if (!req.has_speculate) req.params.speculate = options_.speculate;
  metrics_.active().Increment();
  // Anthropic's events are named ("event: <type>") and end without [DONE].
  EventStream stream(http, /*named_events=*/api == ChatApi::kAnthropic);
  if (req.stream) stream.Start();
  ChoicesRun run;
  run.generator = &g;
  run.request = &req;
  run.prompts = &prompts;
  run.writer = &writer;
  run.stream = req.stream ? &stream : nullptr;
  run.conversation = conversation;
  run.context_length = context_length_;
  run.stopping = &stopping_;
  run.on_first_token = [&] { metrics_.FirstToken(absl::Now() - arrival); };
  const ChoicesOutcome out = RunChoices(run);
  metrics_.Tokens(out.usage.prompt_tokens, out.usage.completion_tokens);
  if (conversation != nullptr && out.error.ok()) {
    metrics_.ConversationTokens(out.usage.kept_tokens,
                                out.usage.prompt_tokens - out.usage.kept_tokens);
  }
  metrics_.Forced(out.usage.forced_tokens);
  metrics_.Sessions(out.usage.session_rebuilds, out.usage.session_relocations);
  metrics_.active().Decrement();
  done();
  if (!out.error.ok()) {
    ApiError e = FromStatus(out.error);
    if (conversation != nullptr && absl::IsAborted(out.error)) e.param = "x-session-id";
    if (!req.stream) return SendError(http, e, api);
    std::vector<json> error = {ErrorBody(e, api)};
    stream.Send(error);
    return 200;
  }
  if (!req.stream) {
    if (out.cancelled) return SendError(http, Unavailable("the gateway is shutting down"), api);
    json response = writer.Response(out.usage.prompt_tokens, out.usage.completion_tokens);
    return SendJson(http, 200,
                    api == ChatApi::kOpenAi ? out.usage.Annotate(std::move(response)) : response);
  }
  if (out.cancelled) return 200;
  if (req.include_usage) {
    std::vector<json> usage = {out.usage.Annotate(
        writer.UsageChunk(out.usage.prompt_tokens, out.usage.completion_tokens))};
    stream.Send(usage);
  }
  stream.Done();
  return 200;
}

}  // namespace llm::gateway
