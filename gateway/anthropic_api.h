// Anthropic's Messages API over the chat machinery, without HTTP or gRPC:
// POST /v1/messages and /v1/messages/count_tokens bodies in, messages and
// their streaming events out, errors in Anthropic's shape. (llama.cpp's
// server and Ollama serve it too, mainly so that tools written for Claude's
// API can use a local model.)
//
// A request becomes a ChatRequest, served by the same path as OpenAI's chat
// completions (handler.h):
//   system (a string or text blocks)  -> a system message first
//   user text blocks                  -> a user message (blocks joined by "\n")
//   user tool_result blocks           -> tool messages (tool_call_id =
//                                        tool_use_id; is_error prefixes "Error: ")
//   assistant text / tool_use blocks  -> an assistant message with tool_calls
//                                        (id, name, input as JSON text, in order)
//   a last assistant message (text)   -> a prefill: the answer continues it
//   max_tokens (required), stop_sequences (at most 16), temperature [0, 1],
//   top_p, top_k, stream
//   tools [{name, description, input_schema}] and tool_choice {auto, any,
//   tool (name), none; disable_parallel_tool_use} -> tools, tool_choice
//   (any = required, tool = a named function)
// Images, documents, server tools (a tool with a "type" other than
// "custom") and unknown block types are 400 by name; thinking blocks that a
// client sends back are skipped; metadata, thinking, service_tier and other
// unknown fields are ignored.
//
// The answer: {"id": "msg_...", "type": "message", "role": "assistant",
// "model", "content": [{"type": "text", "text"}, {"type": "tool_use", "id",
// "name", "input"}], "stop_reason": "end_turn" | "max_tokens" |
// "stop_sequence" | "tool_use", "stop_sequence", "usage": {"input_tokens",
// "output_tokens"}}; streamed, the events in Anthropic's order, each an
// object whose "type" is the SSE event name: message_start, then per block
// content_block_start, content_block_delta (text_delta, or one
// input_json_delta with a tool call's whole input), content_block_stop (a
// ping after the first block starts), then message_delta (stop_reason,
// stop_sequence, usage.output_tokens) and message_stop.
//
// Threads: free functions; a writer is one request's.
#ifndef LLM_GATEWAY_ANTHROPIC_API_H_
#define LLM_GATEWAY_ANTHROPIC_API_H_

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "gateway/api_error.h"
#include "gateway/choice_writer.h"
#include "gateway/openai_request.h"

namespace llm::gateway {

inline constexpr int kMaxStopSequences = 16;

struct AnthropicRequest {
  ChatRequest chat;     // model, sampling, stopping, messages, tools, stream
  std::string prefill;  // a last assistant message's text: the answer continues it
};

// Parses a /v1/messages body (count_tokens: /v1/messages/count_tokens, where
// max_tokens is not needed). Errors name the field (ApiError::param).
std::optional<ApiError> ParseAnthropicRequest(std::string_view body, const RequestLimits& limits,
                                              bool count_tokens, AnthropicRequest* out);

// {"type": "error", "error": {"type", "message"}}: the error's type from its
// HTTP status (400 invalid_request_error, 401 authentication_error, 404
// not_found_error, 413 request_too_large, 429 rate_limit_error, 503
// overloaded_error, others api_error).
nlohmann::json AnthropicErrorJson(const ApiError& error);

// The answer as Anthropic writes it (see above); `tools`: the tool-call
// parser per answer (null: no tools). Response() is the message;
// UsageChunk() is not used (the usage rides on message_delta).
std::unique_ptr<ChoiceWriter> NewAnthropicWriter(ResponseInfo info, ToolParserFactory tools);

// "end_turn", "max_tokens", "stop_sequence" or "tool_use".
std::string_view AnthropicStopReason(client::StopReason reason, bool called_tools);

}  // namespace llm::gateway

#endif  // LLM_GATEWAY_ANTHROPIC_API_H_
