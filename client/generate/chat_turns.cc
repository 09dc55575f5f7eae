#include "client/generate/chat_turns.h"

#include <utility>

namespace llm::client {

ChatTurns::ChatTurns(ChatTemplate chat_template, std::string system_prompt)
    : template_(std::move(chat_template)), system_prompt_(std::move(system_prompt)) {}

std::vector<ChatMessage> ChatTurns::WithUser(std::string_view user_message) const {
  std::vector<ChatMessage> out = messages_;
  if (out.empty() && !system_prompt_.empty()) out.push_back({"system", system_prompt_});
  out.push_back({"user", std::string(user_message)});
  return out;
}

absl::StatusOr<std::string> ChatTurns::Render(std::string_view user_message) const {
  if (template_.kind() == ChatTemplate::Kind::kJinja) {
    return template_.Render(WithUser(user_message), true);
  }
  const bool first = messages_.empty();
  std::vector<ChatMessage> turn;
  if (first && !system_prompt_.empty()) turn.push_back({"system", system_prompt_});
  turn.push_back({"user", std::string(user_message)});
  std::string text = text_;
  if (!first) text += template_.EndOfAssistantTurn();
  text += template_.FormatTurn(turn, first);
  return text;
}

void ChatTurns::Commit(std::string_view user_message, std::string_view answer,
                       std::string_view rendered) {
  messages_ = WithUser(user_message);
  messages_.push_back({"assistant", std::string(answer)});
  if (template_.kind() != ChatTemplate::Kind::kJinja) {
    text_ = rendered;
    text_ += answer;
  }
}

}  // namespace llm::client
