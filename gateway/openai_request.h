// The OpenAI API's request bodies, without HTTP or gRPC: parsed and checked
// into the client library's GenerateParams (chat, completions) and the
// /tokenize and /detokenize bodies (vLLM's shape).
//
// A bad request names its parameter (ApiError::param), as OpenAI does:
//   {"error": {"message": "...", "type": "invalid_request_error",
//              "param": "temperature", "code": null}}
// Unknown fields are ignored (clients send fields this gateway does not
// read); fields it reads but cannot honour yet are rejected by name. Every
// body goes through ParseJsonBody (api_error.h: nesting bounded, trailing
// bytes refused) and no message quotes a client's value unboundedly, so the
// parsers take any bytes (gateway/fuzz/openai_request_fuzzer.cc).
//
// Threads: free functions, no state. Links no gRPC (only the protobuf-free
// headers of the client library: params.h, chat_template.h's ChatMessage).
#ifndef LLM_GATEWAY_OPENAI_REQUEST_H_
#define LLM_GATEWAY_OPENAI_REQUEST_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "client/generate/chat_template.h"
#include "client/generate/params.h"
#include "client/tools/tool_constraint.h"
#include "gateway/api_error.h"

namespace llm::gateway {

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
  // Structured output (response_format, structured_outputs, or llama.cpp's
  // json_schema / grammar), to be compiled for the model; and the parameter
  // that asked for it (errors name it).
  std::optional<constrain::Spec> constraint;
  std::string constraint_param;
};

// POST /v1/chat/completions, parsed. Messages have roles system (and
// developer), user, assistant (with tool_calls) and tool (openai_tools.h).
struct ChatRequest : GenerationRequest {
  std::vector<client::ChatMessage> messages;
  bool logprobs = false;  // each generated token's logprob (and top_logprobs alternatives)
  int top_logprobs = 0;   // 0..20; needs logprobs
  // Tool calling: the functions the model may call (tools), and
  // tool_choice with parallel_tool_calls (mode kNone without tools).
  std::vector<client::ToolSpec> tools;
  client::ToolChoice tool_choice{client::ToolChoiceMode::kNone, "", true};
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

// POST /tokenize (vLLM's shape): `prompt` text, or chat `messages` (as
// chat takes them) for the caller to render with the model's chat template
// as a chat request is (`add_generation_prompt`: the assistant's header at
// the end, default true). `add_special_tokens`: a prompt's special-token
// text read as the token and BOS added when the vocabulary adds one
// (default true); messages: BOS added on top of what the template writes
// (default false, as vLLM's).
struct TokenizeRequest {
  std::optional<std::string> model;  // nullopt: not given
  std::string prompt;
  std::vector<client::ChatMessage> messages;  // non-empty: a chat
  bool add_special_tokens = true;
  bool add_generation_prompt = true;
};
std::optional<ApiError> ParseTokenizeRequest(std::string_view body, const RequestLimits& limits,
                                             TokenizeRequest* out);

// POST /detokenize: `tokens`, ids >= 0 (the vocabulary's bound is the
// caller's check); may be empty.
struct DetokenizeRequest {
  std::optional<std::string> model;
  std::vector<int32_t> tokens;
};
std::optional<ApiError> ParseDetokenizeRequest(std::string_view body, DetokenizeRequest* out);

}  // namespace llm::gateway

#endif  // LLM_GATEWAY_OPENAI_REQUEST_H_
