// A multi-turn conversation on one model session.
//
//   ChatSession chat(loop, ChatTemplate::Detect(info.chat_template()));
//   auto answer = chat.Send("What is the capital of France?", params, on_token);
//   auto next = chat.Send("And of Italy?", params, on_token);
//
// Each turn's text comes from ChatTurns (chat_turns.h): the new messages
// formatted with the template (chat_template.h), or for a Jinja template
// what the rendering of the whole conversation adds to the session's text;
// encodes them with special tokens recognized (as Hugging Face's
// apply_chat_template does: special-token text typed by the user is read as
// the special token), and prefills only those tokens, appended to the
// session, so a turn costs its own tokens, not the conversation's. The
// client keeps the session's token history (session()); when the model
// service loses the session, the loop re-prefills that history into a new
// one (generate_loop.h).
//
// The token that ended an answer (EOS / EOT) is never fed to the model; the
// next turn starts with the template's end-of-turn text instead, which for
// ChatML and Llama-3 encodes to that same token (a Jinja template's
// rendering has it too).
//
// When a Jinja template re-renders earlier turns (the session's text is not
// a prefix of the new rendering), the turn releases the model session and
// prefills the whole new rendering into a new one (rerenders() counts them):
// the model then sees exactly what the template gives.
//
// Threads: like the loop, one turn at a time. Ownership: borrows the loop.
#ifndef LLM_CLIENT_GENERATE_CHAT_SESSION_H_
#define LLM_CLIENT_GENERATE_CHAT_SESSION_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/generate/chat_template.h"
#include "client/generate/chat_turns.h"
#include "client/generate/generate_loop.h"
#include "client/generate/params.h"
#include "client/generate/ports.h"
#include "client/generate/result.h"

namespace llm::client {

class ChatSession {
 public:
  // Borrows `loop` (and its ports), which must outlive the session.
  // `system_prompt` replaces the template's default system message when
  // non-empty.
  ChatSession(GenerateLoop& loop, ChatTemplate chat_template, std::string system_prompt = "");
  ChatSession(const ChatSession&) = delete;
  ChatSession& operator=(const ChatSession&) = delete;

  // One user turn: streams the assistant's answer to `on_token` and returns
  // it. On an error the conversation is unchanged (the model session is
  // released; the next Send rebuilds it from the history). A cancelled answer (StopReason::
  // kCancelled) stays in the conversation, as far as it went.
  absl::StatusOr<GenerateResult> Send(std::string_view user_message, const GenerateParams& params,
                                      const TokenCallback& on_token);

  // Releases the model session (the conversation is kept: a later Send
  // rebuilds it).
  absl::Status ReleaseSession();

  const Session& session() const { return session_; }
  const std::vector<ChatMessage>& messages() const { return turns_.messages(); }
  const ChatTemplate& chat_template() const { return turns_.chat_template(); }
  // Turns whose template re-rendered earlier turns, so the session was rebuilt.
  int rerenders() const { return rerenders_; }

 private:
  GenerateLoop& loop_;
  ChatTurns turns_;  // the conversation so far
  Session session_;
  int rerenders_ = 0;
};

}  // namespace llm::client

#endif  // LLM_CLIENT_GENERATE_CHAT_SESSION_H_
