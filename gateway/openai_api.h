// The OpenAI API's JSON, without HTTP or gRPC: request bodies parsed and
// checked into the client library's GenerateParams, errors in OpenAI's shape,
// and the response objects (chat.completion, chat.completion.chunk,
// text_completion). logprobs objects: logprobs_json.h.
//
// A bad request names its parameter (ApiError::param), as OpenAI does:
//   {"error": {"message": "...", "type": "invalid_request_error",
//              "param": "temperature", "code": null}}
// Unknown fields are ignored (clients send fields this gateway does not
// read); fields it reads but cannot honour yet are rejected by name.
#ifndef LLM_GATEWAY_OPENAI_API_H_
#define LLM_GATEWAY_OPENAI_API_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "client/generate/chat_template.h"
#include "client/generate/params.h"
#include "client/generate/result.h"

namespace llm::gateway {

// An error answer: the HTTP status and OpenAI's error object.
struct ApiError {
  int http_status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // "" = null
  std::string code;   // "" = null
};

ApiError BadParam(std::string_view param, std::string_view message);
// {"error": {...}}.
nlohmann::json ErrorJson(const ApiError& error);

// Limits on what one request may ask for.
struct RequestLimits {
  int max_n = 8;              // choices per request
  int max_stop = 4;           // stop strings (OpenAI's limit)
  int max_messages = 1024;    // messages per chat request
  int max_logit_bias = 1024;  // logit_bias entries
  int max_prompts = 64;       // prompts per completions request
};

// What chat and completions requests share. `params.max_tokens` is 0 when
// the request gives no max_tokens / max_completion_tokens (has_max_tokens
// false: the caller fills in its default); `has_seed` false: the caller
// picks one; `has_speculate` false: the caller's default (extension
// "speculate", 0..16: GenerateParams::speculate).
struct GenerationRequest {
  std::string model;
  client::GenerateParams params;
  bool has_max_tokens = false;
  bool has_seed = false;
  bool has_speculate = false;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  int n = 1;
};

// POST /v1/chat/completions, parsed.
struct ChatRequest : GenerationRequest {
  std::vector<client::ChatMessage> messages;
  bool logprobs = false;  // each generated token's logprob (and top_logprobs alternatives)
  int top_logprobs = 0;   // 0..20; needs logprobs
};

// Parses `body` (JSON); nullopt on success, the error (400, naming the
// parameter) otherwise.
std::optional<ApiError> ParseChatRequest(std::string_view body, const RequestLimits& limits,
                                         ChatRequest* out);

// One prompt of a completions request: text, or token ids (not encoded).
struct CompletionPrompt {
  std::string text;
  std::vector<int32_t> ids;
  bool is_ids = false;
};

// POST /v1/completions, parsed. `prompt` is a string, an array of strings, an
// array of token ids, or an array of such arrays; each prompt gets n choices
// (choice index = prompt index x n + j). max_tokens 0 is allowed with echo
// (the prompt scored, nothing generated).
struct CompletionRequest : GenerationRequest {
  std::vector<CompletionPrompt> prompts;
  bool echo = false;  // the prompt first in each choice's text (and its logprobs)
  int logprobs = -1;  // -1: none; 0..20: each token's logprob and that many alternatives
};

std::optional<ApiError> ParseCompletionRequest(std::string_view body, const RequestLimits& limits,
                                               CompletionRequest* out);

// OpenAI's finish_reason for a stop reason: "stop" (EOS / EOT, a stop
// string), "length" (max_tokens, the context), "cancelled" otherwise.
std::string_view FinishReason(client::StopReason reason);

// {"prompt_tokens", "completion_tokens", "total_tokens"}.
nlohmann::json UsageJson(int64_t prompt_tokens, int64_t completion_tokens);

// One choice of a non-streamed chat.completion or text_completion.
// `logprobs` is the choice's logprobs object (null when not asked for).
struct ChatChoice {
  std::string text;
  client::StopReason stop_reason = client::StopReason::kEos;
  nlohmann::json logprobs;
};
nlohmann::json ChatCompletionJson(std::string_view id, int64_t created, std::string_view model,
                                  const std::vector<ChatChoice>& choices, int64_t prompt_tokens,
                                  int64_t completion_tokens);

// One chat.completion.chunk with one choice: `delta` ({"role": ...},
// {"content": ...} or {}), `logprobs` (null, or {"content": [...]}),
// `finish_reason` "" = null. `with_usage_null`: the chunk carries "usage":
// null (stream_options.include_usage asks for it on every chunk but the
// last).
nlohmann::json ChatChunkJson(std::string_view id, int64_t created, std::string_view model,
                             int index, nlohmann::json delta, std::string_view finish_reason,
                             bool with_usage_null, nlohmann::json logprobs = nullptr);
// The last chunk when include_usage: no choices, the usage. `object`:
// "chat.completion.chunk" or "text_completion".
nlohmann::json UsageChunkJson(std::string_view id, int64_t created, std::string_view model,
                              int64_t prompt_tokens, int64_t completion_tokens,
                              std::string_view object = "chat.completion.chunk");

// A text_completion (non-streamed: every choice; the choices' text and
// logprobs as CompletionLogprobs builds them).
nlohmann::json CompletionJson(std::string_view id, int64_t created, std::string_view model,
                              const std::vector<ChatChoice>& choices, int64_t prompt_tokens,
                              int64_t completion_tokens);
// One streamed text_completion event with one choice.
nlohmann::json CompletionChunkJson(std::string_view id, int64_t created, std::string_view model,
                                   int index, std::string_view text, nlohmann::json logprobs,
                                   std::string_view finish_reason, bool with_usage_null);

// JSON text that never throws on invalid UTF-8 (replaced with U+FFFD).
std::string Dump(const nlohmann::json& j);

}  // namespace llm::gateway

#endif  // LLM_GATEWAY_OPENAI_API_H_
