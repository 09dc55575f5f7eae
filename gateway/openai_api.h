// The OpenAI API's JSON, without HTTP or gRPC: request bodies parsed and
// checked into the client library's GenerateParams, errors in OpenAI's shape,
// and the response objects (chat.completion, chat.completion.chunk).
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
};

// POST /v1/chat/completions, parsed. `params.max_tokens` is 0 when the
// request gives no max_tokens / max_completion_tokens (the caller fills in
// what is left of the context); `has_seed` false: the caller picks one.
struct ChatRequest {
  std::string model;
  std::vector<client::ChatMessage> messages;
  client::GenerateParams params;
  bool has_seed = false;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  int n = 1;
};

// Parses `body` (JSON); nullopt on success, the error (400, naming the
// parameter) otherwise.
std::optional<ApiError> ParseChatRequest(std::string_view body, const RequestLimits& limits,
                                         ChatRequest* out);

// OpenAI's finish_reason for a stop reason: "stop" (EOS / EOT, a stop
// string), "length" (max_tokens, the context), "cancelled" otherwise.
std::string_view FinishReason(client::StopReason reason);

// {"prompt_tokens", "completion_tokens", "total_tokens"}.
nlohmann::json UsageJson(int64_t prompt_tokens, int64_t completion_tokens);

// One choice of a non-streamed chat.completion.
struct ChatChoice {
  std::string text;
  client::StopReason stop_reason = client::StopReason::kEos;
};
nlohmann::json ChatCompletionJson(std::string_view id, int64_t created, std::string_view model,
                                  const std::vector<ChatChoice>& choices, int64_t prompt_tokens,
                                  int64_t completion_tokens);

// One chat.completion.chunk with one choice: `delta` ({"role": ...},
// {"content": ...} or {}), `finish_reason` "" = null. `with_usage_null`: the
// chunk carries "usage": null (stream_options.include_usage asks for it on
// every chunk but the last).
nlohmann::json ChatChunkJson(std::string_view id, int64_t created, std::string_view model,
                             int index, nlohmann::json delta, std::string_view finish_reason,
                             bool with_usage_null);
// The last chunk when include_usage: no choices, the usage.
nlohmann::json UsageChunkJson(std::string_view id, int64_t created, std::string_view model,
                              int64_t prompt_tokens, int64_t completion_tokens);

// JSON text that never throws on invalid UTF-8 (replaced with U+FFFD).
std::string Dump(const nlohmann::json& j);

}  // namespace llm::gateway

#endif  // LLM_GATEWAY_OPENAI_API_H_
