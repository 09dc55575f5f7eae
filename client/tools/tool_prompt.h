// A conversation with tools, made ready for the model's chat template
// (tool_format.h says which way each family takes them):
//
// kTemplate: the messages as they are, and the tools as the template's
//   `tools` (a JSON array of OpenAI tool objects). Mistral's template takes
//   call ids of 9 letters and digits only: other ids (OpenAI's "call_...")
//   become 9 characters derived from them, the same for a call and its
//   result.
// kSystemMessageTools (Phi-4-mini): the tools as the system message's
//   `tools` field (a JSON array of the functions), a system message added
//   when there is none; earlier calls become the assistant's text in the
//   model's syntax (<|tool_call|>[...]<|/tool_call|>), since the template
//   does not show tool_calls.
// kSystemBlock (templates without tool support: the generic fallback): the
//   Hermes block below appended to the system message (or to the template's
//   own default system message, or as the system message), and the history
//   written as Qwen 2.5's template writes it: an assistant's calls as
//   <tool_call>\n{"name": ..., "arguments": ...}\n</tool_call> after its
//   text, tool results as one user message of
//   <tool_response>\n...\n</tool_response> per run of tool messages.
// kUserBlock (Gemma): Google's function-calling prompt (the instructions,
//   then the functions as a JSON list) atop the first user message; calls
//   as [name(k="v", ...)] in the assistant's text, results as a user message
//   of ```tool_output blocks.
//
// The Hermes block is Qwen 2.5's own tool prompt (its template's text,
// word for word): the tool prompt most open models with tool training have
// seen (Qwen and its fine-tunes, Hermes 2/3, many distilled small models),
// and the one whose syntax the generic parser and constraint expect. SmolLM2
// was trained on a variant (a JSON array inside one <tool_call>); the parser
// takes both.
//
// With no tools (tool_choice "none", or a conversation that only carries
// calls from earlier turns), only the history is rewritten.
//
// Threads: pure functions. Errors: kNone formats, InvalidArgument.
#ifndef LLM_CLIENT_TOOLS_TOOL_PROMPT_H_
#define LLM_CLIENT_TOOLS_TOOL_PROMPT_H_

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "client/generate/chat_template.h"
#include "client/tools/tool_format.h"

namespace llm::client {

struct ToolPrompt {
  std::vector<ChatMessage> messages;
  std::string tools_json;  // ChatTemplate::Render's tools ("" = None)
};

// `default_system`: the system message the template writes when the
// conversation has none (ChatTemplate::default_system(), or the literal
// ExtractChatMlDefaultSystem finds in a ChatML template), kept ahead of the
// Hermes block.
absl::StatusOr<ToolPrompt> PrepareToolPrompt(const ToolFormat& format,
                                             std::span<const ToolSpec> tools,
                                             std::span<const ChatMessage> messages,
                                             std::string_view default_system = {});

// The Hermes block for `tools` (Qwen 2.5's text, starting "# Tools").
std::string HermesToolBlock(std::span<const ToolSpec> tools);
// Google's Gemma function-calling prompt for `tools`.
std::string GemmaToolBlock(std::span<const ToolSpec> tools);

// A call in a family's syntax, as the model would have written it (for the
// history of templates that do not show tool_calls).
std::string WriteToolCalls(ToolSyntax syntax, std::span<const ToolCall> calls);

}  // namespace llm::client

#endif  // LLM_CLIENT_TOOLS_TOOL_PROMPT_H_
