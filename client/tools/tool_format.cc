#include "client/tools/tool_format.h"

#include <nlohmann/json.hpp>

#include "common/strings.h"

namespace llm::client {
namespace {

std::string JsonString(std::string_view s) {
  return nlohmann::json(std::string(s))
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

bool Has(std::string_view text, std::string_view what) {
  return text.find(what) != std::string_view::npos;
}

bool IsWordChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// Whether the template names `tools` (a variable or a message field) as a
// word of its own: it knows about tools.
bool MentionsTools(std::string_view source) {
  constexpr std::string_view kWord = "tools";
  for (size_t at = source.find(kWord); at != std::string_view::npos;
       at = source.find(kWord, at + 1)) {
    const bool before = at > 0 && IsWordChar(source[at - 1]);
    const size_t end = at + kWord.size();
    const bool after = end < source.size() && IsWordChar(source[end]);
    if (!before && !after) return true;
  }
  return false;
}

ToolFormat Format(ToolSyntax syntax, ToolPromptStyle prompt, std::string family) {
  ToolFormat f;
  f.syntax = syntax;
  f.prompt = prompt;
  f.family = std::move(family);
  return f;
}

ToolFormat Unknown(std::string family, std::string reason) {
  ToolFormat f;
  f.family = std::move(family);
  f.reason = std::move(reason);
  return f;
}

}  // namespace

ToolFormat DetectToolFormat(const ChatTemplate& chat_template) {
  return DetectToolFormat(chat_template.kind(), chat_template.source());
}

ToolFormat DetectToolFormat(ChatTemplate::Kind kind, std::string_view source) {
  using P = ToolPromptStyle;
  switch (kind) {
    case ChatTemplate::Kind::kRaw:
      return Unknown("raw", "the model is served without a chat template (raw prompts)");
    case ChatTemplate::Kind::kChatMl:
    case ChatTemplate::Kind::kLlama3:
      return Format(ToolSyntax::kHermes, P::kSystemBlock, "generic (Hermes block)");
    case ChatTemplate::Kind::kJinja:
      break;
  }
  const bool tools = MentionsTools(source);
  if (Has(source, "<tool_call>")) {
    return Format(ToolSyntax::kHermes, tools ? P::kTemplate : P::kSystemBlock, "Qwen / Hermes");
  }
  if (Has(source, "[TOOL_CALLS]")) return Format(ToolSyntax::kMistral, P::kTemplate, "Mistral");
  if (Has(source, "<|python_tag|>") || Has(source, "<|start_header_id|>ipython")) {
    return Format(ToolSyntax::kLlama3, P::kTemplate, "Llama 3.x");
  }
  if (Has(source, "<|tool_call|>") || Has(source, "<|tool|>")) {
    // Phi-4-mini's template reads the tools from the system message; others
    // (Granite) from `tools`.
    const bool in_message = Has(source, "message['tools']") || Has(source, "message.tools");
    return Format(ToolSyntax::kToolCall, in_message ? P::kSystemMessageTools : P::kTemplate,
                  "Phi-4-mini / <|tool_call|>");
  }
  if (tools) {
    return Unknown("unknown",
                   "the model's chat template describes tools in a syntax this server does not "
                   "parse (known: Qwen / Hermes <tool_call>, Llama 3.x, Mistral [TOOL_CALLS], "
                   "Phi-4-mini <|tool_call|>, Gemma)");
  }
  if (Has(source, "<start_of_turn>")) return Format(ToolSyntax::kPythonic, P::kUserBlock, "Gemma");
  return Format(ToolSyntax::kHermes, P::kSystemBlock, "generic (Hermes block)");
}

std::string_view ToolSyntaxName(ToolSyntax syntax) {
  switch (syntax) {
    case ToolSyntax::kHermes:
      return "hermes";
    case ToolSyntax::kLlama3:
      return "llama3";
    case ToolSyntax::kMistral:
      return "mistral";
    case ToolSyntax::kToolCall:
      return "tool_call";
    case ToolSyntax::kPythonic:
      return "pythonic";
    case ToolSyntax::kNone:
      break;
  }
  return "none";
}

std::string ToolObjectJson(const ToolSpec& spec) {
  if (!spec.json.empty()) return spec.json;
  std::string function = StrCat("{\"name\": ", JsonString(spec.name));
  if (!spec.description.empty()) {
    StrAppend(&function, ", \"description\": ", JsonString(spec.description));
  }
  if (!spec.parameters.empty()) StrAppend(&function, ", \"parameters\": ", spec.parameters);
  return StrCat("{\"type\": \"function\", \"function\": ", function, "}}");
}

}  // namespace llm::client
