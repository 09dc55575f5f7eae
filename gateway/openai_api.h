// The OpenAI API's response objects, without HTTP or gRPC: chat.completion,
// chat.completion.chunk and text_completion. Request bodies:
// openai_request.h; errors and JSON text: api_error.h; logprobs objects:
// logprobs_json.h.
#ifndef LLM_GATEWAY_OPENAI_API_H_
#define LLM_GATEWAY_OPENAI_API_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "client/generate/chat_template.h"
#include "client/generate/result.h"
#include "gateway/api_error.h"
#include "gateway/openai_request.h"

namespace llm::gateway {

// OpenAI's finish_reason for a stop reason: "stop" (EOS / EOT, a stop
// string), "length" (max_tokens, the context), "cancelled" otherwise.
std::string_view FinishReason(client::StopReason reason);

// {"prompt_tokens", "completion_tokens", "total_tokens"}.
nlohmann::json UsageJson(int64_t prompt_tokens, int64_t completion_tokens);

// A chat answer's finish_reason: "tool_calls" when it called tools and
// ended by itself (EOS, a stop string), FinishReason otherwise.
std::string_view ChatFinishReason(client::StopReason reason, bool called_tools);

// A tool call as OpenAI writes it: {"id", "type": "function", "function":
// {"name", "arguments"}}.
nlohmann::json ToolCallJson(const client::ToolCall& call);

// One choice of a non-streamed chat.completion or text_completion.
// `logprobs` is the choice's logprobs object (null when not asked for).
// Chat with tools: `tool_calls`, the calls the answer made (an array of
// ToolCallJson; null: none); with calls, an empty text is a null content.
struct ChatChoice {
  std::string text;
  client::StopReason stop_reason = client::StopReason::kEos;
  nlohmann::json logprobs;
  nlohmann::json tool_calls;
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

}  // namespace llm::gateway

#endif  // LLM_GATEWAY_OPENAI_API_H_
