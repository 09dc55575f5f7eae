// The gateway's endpoints, apart from the HTTP server that carries them
// (gateway.h: civetweb) and from gRPC (the services come as client::Services,
// health as a callback), so that the fuzzer and the tests drive them over
// in-memory requests and services.
//
//   POST /v1/chat/completions   streamed (server-sent events) or not; logprobs;
//                               X-Session-Id: a conversation kept in a named
//                               model session (conversations.h)
//   POST /v1/completions        text or token-id prompts (several at once); echo;
//                               logprobs, with the prompt's scores under echo
//   GET  /v1/models, /v1/models/{id}
//   GET  /health                200 when the tokenizer and a model replica are SERVING
//   POST /tokenize, /detokenize text <-> token ids (vLLM's shape)
//   GET  /metrics               Prometheus text format (gateway_metrics.h)
//   POST /v1/messages           Anthropic's Messages API (anthropic_api.h), on the
//                               chat path; /v1/messages/count_tokens
//
// Tool calling (chat and messages): tool_calling.h, with the family of the
// served template (client/tools/tool_format.h).
//
// A generating request (chat, completions) enters admission (admission.h:
// --max_concurrent at once, --max_queued waiting, else 429 with
// Retry-After), encodes its prompts (chat: `messages` rendered with the
// chat template), and runs its choices (choices.h) on a Generator of its
// own over the shared services: each in a new model session released at
// its end, or for a conversation (conversations.h) in its named session,
// which the whole rendering syncs (the gateway keeps no conversation
// state). A streamed request whose client goes away is cancelled
// at the next token it cannot write.
//
// Bad input never reaches past its parser unbounded: request bodies are
// bounded in size, time to arrive and JSON nesting depth (openai_api.h),
// and error messages quote no unbounded client value.
//
// Threads: Handle may be called from any number of threads at once, one
// call per request. Ownership: shares the services; owns the admission
// queue and the metrics.
#ifndef LLM_GATEWAY_HANDLER_H_
#define LLM_GATEWAY_HANDLER_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "client/generate/chat_template.h"
#include "client/generator.h"
#include "client/services.h"
#include "client/tools/tool_format.h"
#include "gateway/admission.h"
#include "gateway/choices.h"
#include "gateway/conversations.h"
#include "gateway/gateway_metrics.h"
#include "gateway/http_auth.h"
#include "gateway/http_exchange.h"
#include "gateway/openai_api.h"
#include "gateway/tool_calling.h"

namespace llm::gateway {

// Which API a chat request speaks: OpenAI's chat completions or Anthropic's
// messages (its answer, events and errors).
enum class ChatApi { kOpenAi, kAnthropic };

struct HandlerOptions {
  std::string served_model_name;    // the model's id; "": from its file's name (model_id.h)
  size_t max_body_bytes = 1 << 20;  // larger request bodies get 413
  // A request body must arrive within this (408 otherwise): a client that
  // trickles its body holds a worker no longer.
  absl::Duration body_timeout = absl::Seconds(30);
  RequestLimits limits;
  AdmissionOptions admission;
  std::string http_auth_token;  // "" = no token needed
  // The model pool's count of new sessions placed by prefix
  // (client::ModelPool::prefix_routed), read at each GET /metrics; empty:
  // none (services without a gRPC model client).
  std::function<int64_t()> prefix_routed;
  // Speculative decoding for requests that do not ask ("speculate"):
  // GenerateParams::speculate, 0..16; 0: off.
  int32_t speculate = 0;
};

// Each service's state by address: "SERVING", or why not.
struct ServiceHealth {
  std::vector<std::pair<std::string, std::string>> tokenizer;
  std::vector<std::pair<std::string, std::string>> model;
};
using HealthCheck = std::function<ServiceHealth()>;

class Handler {
 public:
  Handler(HandlerOptions options, std::shared_ptr<client::Services> services,
          client::ChatTemplate chat_template, HealthCheck health);
  Handler(const Handler&) = delete;
  Handler& operator=(const Handler&) = delete;

  // Answers one request (every endpoint); returns the HTTP status sent.
  int Handle(HttpExchange& http);
  // Answers /health and /metrics only (the admin listener, gateway.h).
  int HandleAdmin(HttpExchange& http);

  // Drain (SIGTERM): from now on /health answers 503 ("draining") and new
  // chat and completions requests 503, while those already admitted go on;
  // in_flight() says how many are left.
  void StartDrain() { draining_.store(true, std::memory_order_release); }
  // Shutdown: running generations are cancelled at their next token, and
  // requests waiting for admission are refused.
  void Stop();
  int in_flight() const { return in_flight_.load(std::memory_order_acquire); }

  const std::string& model_id() const { return model_id_; }
  const client::ChatTemplate& chat_template() const { return template_; }
  GatewayMetrics& metrics() { return metrics_; }
  const Admission& admission() const { return admission_; }

 private:
  int Route(HttpExchange& http);
  int HandleChat(HttpExchange& http);
  // POST /v1/messages, or /v1/messages/count_tokens.
  int HandleMessages(HttpExchange& http, bool count_tokens);
  // A parsed chat request, answered in `api`'s shape: the conversation,
  // the prompt (with `prefill`, Anthropic's last assistant text, after it),
  // admission, generation.
  int ServeChat(HttpExchange& http, absl::Time arrival, ChatRequest& req, ChatApi api,
                const std::string& prefill = "");
  // The prompt text of a chat (tools and tool history as the template takes
  // them: tool_calling.h) and the plan for its answer; the 400 otherwise.
  std::optional<ApiError> RenderPrompt(const ChatRequest& req, bool add_generation_prompt,
                                       ChatApi api, std::string* prompt, ChatToolPlan* plan) const;
  int HandleCompletions(HttpExchange& http);
  int HandleModels(HttpExchange& http);
  int HandleHealth(HttpExchange& http);
  int HandleTokenize(HttpExchange& http, bool detokenize);
  // The request body, bounded in size and in time; an error (413, 408)
  // otherwise.
  std::optional<ApiError> ReadBody(HttpExchange& http, std::string* body) const;
  // Runs the choices and answers (streamed or not). `conversation`: one
  // prompt, n = 1, generated in that session. `done` is called once the
  // generation is over, before the response's last bytes are written: it
  // gives back the admission ticket and the conversation, so that a client
  // that sends its next request the moment it has the answer finds them free.
  int Serve(HttpExchange& http, absl::Time arrival, GenerationRequest& req,
            const std::vector<PromptIds>& prompts, ChoiceWriter& writer, client::Generator& g,
            const std::function<void()>& done, client::Session* conversation = nullptr,
            ChatApi api = ChatApi::kOpenAi);
  // A place to generate (429 or 503 otherwise).
  absl::StatusOr<Admission::Ticket> Admit();
  std::optional<ApiError> CheckModel(const GenerationRequest& req) const;
  // Compiles the request's structured output for the model
  // (req.params.constraint); 400 naming the parameter and what the engine
  // does not support.
  std::optional<ApiError> Constrain(GenerationRequest& req);
  // 400 (context_length_exceeded, naming `param`) for a prompt that fills the context.
  std::optional<ApiError> CheckPromptLength(int64_t tokens, std::string_view param) const;
  // Token texts through the services' cache of the vocabulary's bytes.
  TokenText TextOf() const;

  const HandlerOptions options_;
  const std::shared_ptr<client::Services> services_;
  const client::ChatTemplate template_;
  const HealthCheck health_;
  const HttpAuth auth_;
  const std::string model_id_;
  const int64_t context_length_;
  const int64_t vocab_size_;
  const bool add_bos_;  // raw template only: the vocabulary's BOS first
  // Tool calling: the template's family, its own system message (kept
  // ahead of a tools block), and the vocabulary's control tokens by text.
  const client::ToolFormat tool_format_;
  const std::string default_system_;
  std::unordered_map<std::string, int32_t> control_tokens_;
  const int64_t created_;  // the model's "created": when the gateway started
  Admission admission_;
  RunningConversations running_;  // X-Session-Id requests running in this process
  GatewayMetrics metrics_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> draining_{false};
  std::atomic<int> in_flight_{0};  // chat and completions requests being handled
};

}  // namespace llm::gateway

#endif  // LLM_GATEWAY_HANDLER_H_
