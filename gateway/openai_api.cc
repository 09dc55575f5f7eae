#include "gateway/openai_api.h"

#include <utility>

namespace llm::gateway {

using nlohmann::json;

std::string_view FinishReason(client::StopReason reason) {
  switch (reason) {
    case client::StopReason::kEos:
    case client::StopReason::kStopString:
      return "stop";
    case client::StopReason::kMaxTokens:
    case client::StopReason::kContext:
      return "length";
    case client::StopReason::kCancelled:
      break;
  }
  return "cancelled";
}

std::string_view ChatFinishReason(client::StopReason reason, bool called_tools) {
  if (called_tools &&
      (reason == client::StopReason::kEos || reason == client::StopReason::kStopString)) {
    return "tool_calls";
  }
  return FinishReason(reason);
}

nlohmann::json ToolCallJson(const client::ToolCall& call) {
  return json{{"id", call.id},
              {"type", "function"},
              {"function", {{"name", call.name}, {"arguments", call.arguments}}}};
}

nlohmann::json UsageJson(int64_t prompt_tokens, int64_t completion_tokens) {
  return json{{"prompt_tokens", prompt_tokens},
              {"completion_tokens", completion_tokens},
              {"total_tokens", prompt_tokens + completion_tokens}};
}

nlohmann::json ChatCompletionJson(std::string_view id, int64_t created, std::string_view model,
                                  const std::vector<ChatChoice>& choices, int64_t prompt_tokens,
                                  int64_t completion_tokens) {
  json out_choices = json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const ChatChoice& c = choices[i];
    const bool called = c.tool_calls.is_array() && !c.tool_calls.empty();
    json message = {{"role", "assistant"},
                    {"content", called && c.text.empty() ? json() : json(c.text)}};
    if (called) message["tool_calls"] = c.tool_calls;
    out_choices.push_back(
        {{"index", i},
         {"message", std::move(message)},
         {"logprobs", c.logprobs},
         {"finish_reason", std::string(ChatFinishReason(c.stop_reason, called))}});
  }
  return json{{"id", id},
              {"object", "chat.completion"},
              {"created", created},
              {"model", model},
              {"choices", std::move(out_choices)},
              {"usage", UsageJson(prompt_tokens, completion_tokens)}};
}

nlohmann::json ChatChunkJson(std::string_view id, int64_t created, std::string_view model,
                             int index, nlohmann::json delta, std::string_view finish_reason,
                             bool with_usage_null, nlohmann::json logprobs) {
  json choice{{"index", index},
              {"delta", std::move(delta)},
              {"logprobs", std::move(logprobs)},
              {"finish_reason", finish_reason.empty() ? json() : json(finish_reason)}};
  json out{{"id", id},
           {"object", "chat.completion.chunk"},
           {"created", created},
           {"model", model},
           {"choices", json::array({std::move(choice)})}};
  if (with_usage_null) out["usage"] = nullptr;
  return out;
}

nlohmann::json UsageChunkJson(std::string_view id, int64_t created, std::string_view model,
                              int64_t prompt_tokens, int64_t completion_tokens,
                              std::string_view object) {
  return json{{"id", id},
              {"object", object},
              {"created", created},
              {"model", model},
              {"choices", json::array()},
              {"usage", UsageJson(prompt_tokens, completion_tokens)}};
}

nlohmann::json CompletionJson(std::string_view id, int64_t created, std::string_view model,
                              const std::vector<ChatChoice>& choices, int64_t prompt_tokens,
                              int64_t completion_tokens) {
  json out_choices = json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    out_choices.push_back({{"index", i},
                           {"text", choices[i].text},
                           {"logprobs", choices[i].logprobs},
                           {"finish_reason", std::string(FinishReason(choices[i].stop_reason))}});
  }
  return json{{"id", id},
              {"object", "text_completion"},
              {"created", created},
              {"model", model},
              {"choices", std::move(out_choices)},
              {"usage", UsageJson(prompt_tokens, completion_tokens)}};
}

nlohmann::json CompletionChunkJson(std::string_view id, int64_t created, std::string_view model,
                                   int index, std::string_view text, nlohmann::json logprobs,
                                   std::string_view finish_reason, bool with_usage_null) {
  json choice{{"index", index},
              {"text", text},
              {"logprobs", std::move(logprobs)},
              {"finish_reason", finish_reason.empty() ? json() : json(finish_reason)}};
  json out{{"id", id},
           {"object", "text_completion"},
           {"created", created},
           {"model", model},
           {"choices", json::array({std::move(choice)})}};
  if (with_usage_null) out["usage"] = nullptr;
  return out;
}

}  // namespace llm::gateway
