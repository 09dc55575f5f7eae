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

absl::StatusOr<TurnPlan> ChatTurns::Plan(std::string_view user_message) const {
  TurnPlan plan;
  const bool first = messages_.empty();
  if (template_.kind() != ChatTemplate::Kind::kJinja) {
    std::vector<ChatMessage> turn;
    if (first && !system_prompt_.empty()) turn.push_back({"system", system_prompt_});
    turn.push_back({"user", std::string(user_message)});
    plan.text = first ? std::string() : template_.EndOfAssistantTurn();
    plan.text += template_.FormatTurn(turn, first);
    return plan;
  }
  absl::StatusOr<std::string> rendered = template_.Render(WithUser(user_message), true);
  if (!rendered.ok()) return rendered.status();
  plan.rendered = *std::move(rendered);
  if (plan.rendered.compare(0, session_text_.size(), session_text_) == 0) {
    plan.text = plan.rendered.substr(session_text_.size());
  } else {
    plan.text = plan.rendered;
    plan.rebuild = true;
  }
  return plan;
}

void ChatTurns::Commit(std::string_view user_message, std::string_view answer,
                       const TurnPlan& plan) {
  messages_ = WithUser(user_message);
  messages_.push_back({"assistant", std::string(answer)});
  if (template_.kind() == ChatTemplate::Kind::kJinja) {
    session_text_ = plan.rendered;
    session_text_ += answer;
  }
}

}  // namespace llm::client
