// Tool calling for a chat request, between its parsed body (OpenAI's or
// Anthropic's) and its generation: how the tools and the tool history reach
// the model's chat template, how the answer is read for calls, and the
// constraint a tool choice asks for (client/tools says what each family
// does).
//
//   tools   tool_choice           prompt                      answer
//   none    (history only)        history in the model's form  text
//   given   none                  history, no tools            text
//   given   auto                  tools and history            parsed for calls
//   given   required / function   the same                     parsed; constrained
//
// A model whose template has no known tool syntax (raw prompts, a template
// that describes tools in a syntax not parsed here) gets 400 naming the
// family and why, for any request with tools or tool history: never a
// guessed syntax.
//
// The constraint: ChatToolPlan::constraint is the text for the grammar
// engine (an xgrammar structural tag, tool_constraint.h) for required /
// a named function (and auto, where a family's calls open with a marker).
// Handler::ServeChat compiles it and generates under it (with a
// response_format that constrains too it is a 400; constraint_error is a
// 400); the answer is then parsed for the calls.
//
// Threads: free functions and plain data.
#ifndef LLM_GATEWAY_TOOL_CALLING_H_
#define LLM_GATEWAY_TOOL_CALLING_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "client/generate/chat_template.h"
#include "client/tools/tool_call_parser.h"
#include "client/tools/tool_constraint.h"
#include "client/tools/tool_format.h"
#include "gateway/api_error.h"
#include "gateway/choice_writer.h"

namespace llm::gateway {

struct ChatToolPlan {
  std::vector<client::ChatMessage> messages;  // what the template renders
  std::string tools_json;                     // its `tools` ("" = None)
  // The answer is read for calls (tools given and tool_choice not none).
  bool parse = false;
  client::ToolSyntax syntax = client::ToolSyntax::kNone;
  client::ToolParserOptions parser;
  // For the generation loop (see above): the structural tag, or nullopt
  // (nothing to constrain, or
  // constraint_error says why not: Gemma's pythonic calls under required).
  std::optional<std::string> constraint;
  absl::Status constraint_error;

  // A parser per choice (null when !parse).
  ToolParserFactory ParserFactory() const;
};

struct ChatToolInput {
  const client::ToolFormat* format = nullptr;  // the served template's
  const std::vector<client::ToolSpec>* tools = nullptr;
  client::ToolChoice choice;
  const std::vector<client::ChatMessage>* messages = nullptr;
  std::string_view default_system;  // the template's own system message ("" none)
  client::ControlTokenId control_token_id;
  std::string id_prefix = "call_";  // new calls' ids: the prefix and 24 letters and digits
};

// The plan, or the 400 (param "tools", or "messages" for tool history
// alone) when the model has no known tool syntax.
std::optional<ApiError> PlanChatTools(const ChatToolInput& in, ChatToolPlan* plan);

}  // namespace llm::gateway

#endif  // LLM_GATEWAY_TOOL_CALLING_H_
