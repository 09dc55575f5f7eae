// Tool calling per model family: which syntax a model writes its calls in,
// and how the tools reach its prompt, from its chat template's text.
//
//   syntax     what the model writes                           families
//   kHermes    <tool_call>{"name": N, "arguments": {...}}</tool_call>
//              (or a JSON array of such objects inside)         Qwen 2.5 / 3, QwQ, Hermes 2/3;
//                                                              the generic fallback
//   kLlama3    {"name": N, "parameters": {...}} as the whole
//              answer, or after <|python_tag|> (also
//              N.call(k="v", ...) there: built-in tools)        Llama 3.1 / 3.2 / 3.3
//   kMistral   [TOOL_CALLS][{"name": N, "arguments": {...},
//              "id": "abcDEF123"}, ...] (or [TOOL_CALLS]N[ARGS]{...})  Mistral Nemo / v0.3 / Small
//   kToolCall  <|tool_call|>[{"name": N, "arguments": {...}}, ...]<|/tool_call|>
//              or functools[...]                               Phi-4-mini, Granite
//   kPythonic  [N(k="v", n=3), ...] at the start of the answer  Gemma 2 / 3 (Google's
//                                                              function-calling prompt)
//
// How the tools reach the prompt (ToolPromptStyle): a template that renders
// tools itself gets them as `tools` (kTemplate), as transformers passes them;
// Phi-4-mini's reads them from the system message (kSystemMessageTools). A
// template with no tool support gets a block of text instead (tool_prompt.h):
// ChatML and other templates without tools (SmolLM2, Phi-3.5, Zephyr, Mistral
// v0.2) the Hermes block in the system message (kSystemBlock); Gemma, whose
// templates have no system role of their own, Google's documented prompt at
// the top of the first user message (kUserBlock).
//
// A template that speaks of tools in a syntax not listed here (DeepSeek R1's
// <｜tool▁calls▁begin｜>, Command R's <|START_ACTION|>, FunctionGemma's
// <start_function_call>, Functionary's >>>), and raw prompts (no template),
// have no known syntax: kNone, with the reason, which a server answers as a
// 400 rather than guess (a guessed syntax would return half-parsed calls).
//
// Threads: pure functions and plain data.
#ifndef LLM_CLIENT_TOOLS_TOOL_FORMAT_H_
#define LLM_CLIENT_TOOLS_TOOL_FORMAT_H_

#include <string>
#include <string_view>

#include "client/generate/chat_template.h"

namespace llm::client {

// A function the model may call: OpenAI's tools[i].function (Anthropic's
// tools[i]).
struct ToolSpec {
  std::string name;
  std::string description;  // "" = none given
  std::string parameters;   // its arguments' JSON Schema, JSON text ("" = none given)
  // The tool as the client sent it, JSON text of OpenAI's {"type":
  // "function", "function": {...}} (for the template, which may show any of
  // its keys); "" = made from the fields above.
  std::string json;
};

enum class ToolSyntax { kNone, kHermes, kLlama3, kMistral, kToolCall, kPythonic };

enum class ToolPromptStyle {
  kTemplate,            // the template's own `tools`
  kSystemMessageTools,  // the system message's `tools` field (Phi-4-mini)
  kSystemBlock,         // a Hermes block of text in the system message
  kUserBlock,           // Google's block of text atop the first user message (Gemma)
};

struct ToolFormat {
  ToolSyntax syntax = ToolSyntax::kNone;
  ToolPromptStyle prompt = ToolPromptStyle::kTemplate;
  std::string family;  // for messages and logs: "Qwen / Hermes", "Llama 3.x", ...
  std::string reason;  // kNone: why there is no known syntax
};

// The format for a chat template (its kind and, for Jinja, its text).
ToolFormat DetectToolFormat(const ChatTemplate& chat_template);
ToolFormat DetectToolFormat(ChatTemplate::Kind kind, std::string_view template_source);

// "hermes", "llama3", "mistral", "tool_call", "pythonic", "none".
std::string_view ToolSyntaxName(ToolSyntax syntax);

// The tool as OpenAI's tool object, JSON text: spec.json, or one made from
// its fields ({"type": "function", "function": {"name", "description",
// "parameters"}}, the fields given only).
std::string ToolObjectJson(const ToolSpec& spec);

}  // namespace llm::client

#endif  // LLM_CLIENT_TOOLS_TOOL_FORMAT_H_
