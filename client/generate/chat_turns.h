// A chat's messages and their rendering, without the services (ChatSession
// drives it; tests drive it directly).
//
//   ChatTurns turns(tmpl, system_prompt);
//   auto text = turns.Render("What is the capital of France?");  // the whole conversation
//   ... encode `text`, reuse the session (conversation.h), generate `answer` ...
//   turns.Commit("What is the capital of France?", answer, *text);
//
// Render gives the whole conversation with the new user message, ending
// with the generation prompt, as a request without a session would send it:
// for a Jinja template its rendering of every message; for the written-out
// formats (ChatML, Llama-3, raw), the text of the earlier turns as they were
// rendered and answered, then EndOfAssistantTurn() and FormatTurn() of the
// new one. What the model session already holds of it is found by tokens
// (conversation.h), so a template that re-renders earlier turns is handled
// there.
//
// Threads: one caller at a time. Errors: the template's (Render).
#ifndef LLM_CLIENT_GENERATE_CHAT_TURNS_H_
#define LLM_CLIENT_GENERATE_CHAT_TURNS_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "client/generate/chat_template.h"

namespace llm::client {

class ChatTurns {
 public:
  // `system_prompt` non-empty: the conversation's first message is this
  // system message (otherwise the template's default, if it has one).
  ChatTurns(ChatTemplate chat_template, std::string system_prompt);

  // The whole conversation with `user_message` added, up to the assistant's
  // answer.
  absl::StatusOr<std::string> Render(std::string_view user_message) const;
  // Records a turn: `rendered` (what Render gave for `user_message`) was
  // answered with `answer`.
  void Commit(std::string_view user_message, std::string_view answer, std::string_view rendered);

  const std::vector<ChatMessage>& messages() const { return messages_; }
  // The written-out formats' text of the turns so far (empty for Jinja).
  const std::string& text() const { return text_; }
  // Goes on from a saved conversation: its messages() and text().
  void Restore(std::vector<ChatMessage> messages, std::string text) {
    messages_ = std::move(messages);
    text_ = std::move(text);
  }
  const ChatTemplate& chat_template() const { return template_; }

 private:
  std::vector<ChatMessage> WithUser(std::string_view user_message) const;

  const ChatTemplate template_;
  const std::string system_prompt_;
  std::vector<ChatMessage> messages_;
  std::string text_;  // written-out formats: the turns so far, rendered and answered
};

}  // namespace llm::client

#endif  // LLM_CLIENT_GENERATE_CHAT_TURNS_H_
