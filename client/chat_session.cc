#include "client/chat_session.h"

#include <utility>

#include "common/status_macros.h"

namespace llm::client {

ChatSession::ChatSession(Generator& generator, ChatTemplate chat_template,
                         std::string system_prompt)
    : generator_(generator),
      template_(std::move(chat_template)),
      system_prompt_(std::move(system_prompt)) {}

std::string ChatSession::NextTurnText(std::string_view user_message) const {
  std::vector<ChatMessage> turn;
  const bool first = messages_.empty();
  if (first && !system_prompt_.empty()) turn.push_back({"system", system_prompt_});
  turn.push_back({"user", std::string(user_message)});
  std::string text = first ? std::string() : template_.EndOfAssistantTurn();
  text += template_.FormatTurn(turn, first);
  return text;
}

absl::StatusOr<GenerateResult> ChatSession::Send(std::string_view user_message,
                                                 const GenerateParams& params,
                                                 const TokenCallback& on_token) {
  LLM_RETURN_IF_ERROR(ValidateParams(params));
  const bool first = messages_.empty();
  EncodeOptions encode;
  encode.allow_special = true;
  // Raw text gets the vocabulary's BOS the way a plain prompt would; the
  // templates write their own opening.
  encode.add_bos = first && template_.kind() == ChatTemplate::Kind::kRaw &&
                   generator_.tokenizer_info().add_bos();
  LLM_ASSIGN_OR_RETURN(std::vector<int32_t> ids,
                       generator_.Encode(NextTurnText(user_message), encode));
  const Session before = session_;
  absl::StatusOr<GenerateResult> result = generator_.Generate(session_, ids, params, on_token);
  if (!result.ok()) {
    // Back to the conversation before this turn; the model session (which
    // may hold part of the turn) is dropped and rebuilt by the next Send.
    generator_.Release(session_).IgnoreError();
    session_ = before;
    session_.id.clear();
    session_.unsynced = false;
    return result.status();
  }
  if (first && !system_prompt_.empty()) messages_.push_back({"system", system_prompt_});
  messages_.push_back({"user", std::string(user_message)});
  messages_.push_back({"assistant", result->text});
  return result;
}

absl::Status ChatSession::ReleaseSession() {
  Session kept = session_;
  absl::Status s = generator_.Release(session_);
  // Keep the history, without the model session: the next Send rebuilds it.
  session_ = std::move(kept);
  session_.id.clear();
  session_.unsynced = false;
  return s;
}

}  // namespace llm::client
