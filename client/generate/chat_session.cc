#include "client/generate/chat_session.h"

#include <utility>

#include "common/status_macros.h"

namespace llm::client {

ChatSession::ChatSession(GenerateLoop& loop, ChatTemplate chat_template, std::string system_prompt)
    : loop_(loop), turns_(std::move(chat_template), std::move(system_prompt)) {}

absl::StatusOr<GenerateResult> ChatSession::Send(std::string_view user_message,
                                                 const GenerateParams& params,
                                                 const TokenCallback& on_token) {
  LLM_RETURN_IF_ERROR(ValidateParams(params));
  LLM_ASSIGN_OR_RETURN(std::string rendered, turns_.Render(user_message));
  EncodeOptions encode;
  encode.allow_special = true;
  // Raw text gets the vocabulary's BOS the way a plain prompt would; the
  // templates write their own opening.
  encode.add_bos =
      chat_template().kind() == ChatTemplate::Kind::kRaw && loop_.tokenizer().add_bos();
  const Session before = session_;
  LLM_ASSIGN_OR_RETURN(Turn turn,
                       ReuseSession(loop_.tokenizer(), loop_.model(), rendered, encode, session_));
  absl::StatusOr<GenerateResult> result =
      loop_.Generate(session_, std::span(turn.ids).subspan(turn.held), params, on_token);
  if (!result.ok()) {
    // Back to the conversation before this turn; the model session (which
    // may hold part of the turn) is dropped and rebuilt by the next Send.
    loop_.Release(session_).IgnoreError();
    session_ = before;
    session_.id.clear();
    session_.unsynced = false;
    return result.status();
  }
  if (turn.dropped > 0) {
    ++rerenders_;
    recomputed_ += static_cast<int64_t>(turn.dropped);
  }
  turns_.Commit(user_message, result->text, rendered);
  return result;
}

absl::Status ChatSession::ReleaseSession() {
  Session kept = session_;
  absl::Status s = loop_.Release(session_);
  // Keep the history, without the model session: the next Send rebuilds it.
  session_ = std::move(kept);
  session_.id.clear();
  session_.unsynced = false;
  return s;
}

}  // namespace llm::client
