// What each chat turn prefills: the conversation's bookkeeping, without the
// services (ChatSession drives it; tests drive it directly).
//
//   ChatTurns turns(tmpl, system_prompt);
//   auto plan = turns.Plan("What is the capital of France?");   // text to prefill
//   ... generate `answer` after plan->text ...
//   turns.Commit("What is the capital of France?", answer, *plan);
//
// The model session holds the text of every turn so far (prompts and the
// generated answers). For a Jinja template the whole conversation, with the
// new user message and the generation prompt, is rendered each turn, and
// the turn's text is what that rendering adds to the session's text. When
// the session's text is not a prefix of the new rendering (the template
// re-renders earlier turns: Qwen3 drops the <think> blocks of old answers,
// Llama 3 trims them, a date in the system message changed), the plan says
// `rebuild`: the session must be replaced by one prefilled with the whole
// new rendering (plan.text), which is exactly what the template asks the
// model to see. The written-out formats (ChatML, Llama-3, raw) append
// EndOfAssistantTurn() + FormatTurn() as before and never rebuild.
//
// Threads: one caller at a time. Errors: the template's (Render).
#ifndef LLM_CLIENT_GENERATE_CHAT_TURNS_H_
#define LLM_CLIENT_GENERATE_CHAT_TURNS_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "client/generate/chat_template.h"

namespace llm::client {

struct TurnPlan {
  std::string text;      // what to encode and prefill for this turn
  bool rebuild = false;  // prefill `text` into a new session instead of appending
  std::string rendered;  // kJinja: the whole rendering (the session's text after the prompt)
};

class ChatTurns {
 public:
  // `system_prompt` non-empty: the conversation's first message is this
  // system message (otherwise the template's default, if it has one).
  ChatTurns(ChatTemplate chat_template, std::string system_prompt);

  absl::StatusOr<TurnPlan> Plan(std::string_view user_message) const;
  // Records a turn whose answer was generated after `plan`'s text.
  void Commit(std::string_view user_message, std::string_view answer, const TurnPlan& plan);

  const std::vector<ChatMessage>& messages() const { return messages_; }
  const ChatTemplate& chat_template() const { return template_; }
  // The text the model session holds (kJinja; "" before the first turn).
  const std::string& session_text() const { return session_text_; }

 private:
  std::vector<ChatMessage> WithUser(std::string_view user_message) const;

  const ChatTemplate template_;
  const std::string system_prompt_;
  std::vector<ChatMessage> messages_;
  std::string session_text_;
};

}  // namespace llm::client

#endif  // LLM_CLIENT_GENERATE_CHAT_TURNS_H_
