// A multi-turn conversation on one model session.
//
//   ChatSession chat(loop, ChatTemplate::Detect(info.chat_template()));
//   auto answer = chat.Send("What is the capital of France?", params, on_token);
//   auto next = chat.Send("And of Italy?", params, on_token);
//
// Each turn renders the whole conversation (chat_turns.h), encodes it with
// special tokens recognized (as Hugging Face's apply_chat_template does:
// special-token text typed by the user is read as the special token), and
// reuses the model session by the conversation policy (conversation.h): the
// session keeps the longest token prefix it shares with the encoding and
// the turn prefills the rest, so a turn costs its own tokens, not the
// conversation's. The client keeps the session's token history (session());
// when the model service loses the session, the loop re-prefills that
// history into a new one (generate_loop.h).
//
// The token that ended an answer (EOS / EOT) is never fed to the model; the
// next turn's rendering has the template's end-of-turn text there instead,
// which encodes to that same token for ChatML, Llama-3 and the Jinja
// templates.
//
// When a template re-renders earlier turns, the session is cut back to
// where its tokens and the new rendering agree (rerenders() counts such
// turns, and recomputed() the tokens prefilled again).
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
#include "client/generate/conversation.h"
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

  // Goes on from a saved conversation (chat_file.h): its messages, its
  // template text (ChatTurns::text()) and its model session (`session.id`
  // empty: the next Send prefills `session.tokens` into a new one).
  void Resume(std::vector<ChatMessage> messages, std::string text, Session session) {
    turns_.Restore(std::move(messages), std::move(text));
    session_ = std::move(session);
  }
  const std::string& text() const { return turns_.text(); }

  const Session& session() const { return session_; }
  const std::vector<ChatMessage>& messages() const { return turns_.messages(); }
  const ChatTemplate& chat_template() const { return turns_.chat_template(); }
  // Turns that cut the session back (the template re-rendered earlier
  // turns, or an answer's tokens encode otherwise as text), and the tokens
  // they dropped from it.
  int rerenders() const { return rerenders_; }
  int64_t recomputed() const { return recomputed_; }

 private:
  GenerateLoop& loop_;
  ChatTurns turns_;  // the conversation so far
  Session session_;
  int rerenders_ = 0;
  int64_t recomputed_ = 0;
};

}  // namespace llm::client

#endif  // LLM_CLIENT_GENERATE_CHAT_SESSION_H_
