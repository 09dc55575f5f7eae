// Tool calling's fields of an OpenAI chat request: `tools` (function
// definitions, their parameters' JSON Schemas kept in the client's key
// order), `tool_choice` ("none", "auto", "required" or {"type": "function",
// "function": {"name"}}), `parallel_tool_calls`, and the messages' tool
// fields (an assistant's `tool_calls`, a tool message's `tool_call_id` and
// `name`). Bad values name their parameter (tools[1].function.name, ...).
//
// Threads: free functions, no state.
#ifndef LLM_GATEWAY_OPENAI_TOOLS_H_
#define LLM_GATEWAY_OPENAI_TOOLS_H_

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "client/generate/chat_template.h"
#include "client/tools/tool_constraint.h"
#include "gateway/api_error.h"

namespace llm::gateway {

inline constexpr int kMaxTools = 128;      // OpenAI's limit
inline constexpr int kMaxToolCalls = 128;  // calls in one assistant message
inline constexpr size_t kMaxToolName = 128;

// tools, tool_choice and parallel_tool_calls of the body `j`; `body` is its
// text, parsed again keeping key order when there are tools. Without tools
// the choice is kNone; with tools it defaults to kAuto. A tool_choice other
// than "none" without tools, a function choice naming no tool, two tools of
// one name: 400.
std::optional<ApiError> ReadTools(const nlohmann::json& j, std::string_view body,
                                  std::vector<client::ToolSpec>* tools, client::ToolChoice* choice);

// Checks a tool's name (letters, digits, _ - ., at most kMaxToolName bytes)
// and parameters (a JSON object, of "type" "object" if it says; null:
// none) into *out; errors name `param`.
std::optional<ApiError> ReadToolSpec(const nlohmann::ordered_json& name,
                                     const nlohmann::ordered_json* description,
                                     const nlohmann::ordered_json* parameters,
                                     const std::string& param, client::ToolSpec* out);

// A message's tool fields into *out: an assistant's tool_calls (each {"id",
// "type": "function", "function": {"name", "arguments"}}: arguments as
// OpenAI sends them, a string, or an object), a tool message's tool_call_id
// (required) and name.
std::optional<ApiError> ReadMessageToolFields(const nlohmann::json& m, const std::string& param,
                                              client::ChatMessage* out);

}  // namespace llm::gateway

#endif  // LLM_GATEWAY_OPENAI_TOOLS_H_
