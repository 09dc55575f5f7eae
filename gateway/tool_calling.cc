#include "gateway/tool_calling.h"

#include <utility>

#include "client/tools/tool_prompt.h"
#include "common/strings.h"

namespace llm::gateway {

ToolParserFactory ChatToolPlan::ParserFactory() const {
  if (!parse) return nullptr;
  return [syntax = syntax, options = parser] {
    return std::make_unique<client::ToolCallParser>(syntax, options);
  };
}

std::optional<ApiError> PlanChatTools(const ChatToolInput& in, ChatToolPlan* plan) {
  const std::vector<client::ChatMessage>& messages = *in.messages;
  const std::vector<client::ToolSpec>& tools = *in.tools;
  bool history = false;
  for (const client::ChatMessage& m : messages) {
    history = history || m.role == "tool" || !m.tool_calls.empty();
  }
  if (tools.empty() && !history) {
    plan->messages = messages;
    return std::nullopt;
  }
  const client::ToolFormat& format = *in.format;
  if (format.syntax == client::ToolSyntax::kNone) {
    return BadParam(tools.empty() ? "messages" : "tools",
                    StrCat("tool calling is not supported for this model (chat template family: ",
                           format.family, "): ", format.reason));
  }
  const bool active = in.choice.mode != client::ToolChoiceMode::kNone && !tools.empty();
  absl::StatusOr<client::ToolPrompt> prompt = client::PrepareToolPrompt(
      format,
      active ? std::span<const client::ToolSpec>(tools) : std::span<const client::ToolSpec>(),
      messages, in.default_system);
  if (!prompt.ok()) return BadParam("tools", std::string(prompt.status().message()));
  plan->messages = std::move(prompt->messages);
  plan->tools_json = std::move(prompt->tools_json);
  plan->syntax = format.syntax;
  plan->parse = active;
  if (!active) return std::nullopt;
  client::ToolParserOptions& p = plan->parser;
  if (!in.choice.parallel || in.choice.mode == client::ToolChoiceMode::kFunction) p.max_calls = 1;
  // Mistral's template wants ids of 9 letters and digits in the next turn.
  if (format.syntax == client::ToolSyntax::kMistral) {
    p.new_id = [] { return client::RandomToolCallId("", 9); };
  } else {
    p.new_id = [prefix = in.id_prefix] { return client::RandomToolCallId(prefix, 24); };
  }
  for (const client::ToolSpec& t : tools) p.tool_names.push_back(t.name);
  absl::StatusOr<std::optional<std::string>> constraint =
      client::ToolCallConstraint(format.syntax, tools, in.choice, in.control_token_id);
  if (constraint.ok()) {
    plan->constraint = *std::move(constraint);
  } else {
    plan->constraint_error = constraint.status();
  }
  return std::nullopt;
}

}  // namespace llm::gateway
