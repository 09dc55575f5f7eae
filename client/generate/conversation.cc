#include "client/generate/conversation.h"

#include <algorithm>
#include <string>

#include "common/status_macros.h"

namespace llm::client {
namespace {

// The bytes of `ids`, concatenated (the tokenizer's Decode, from its cache).
absl::StatusOr<std::string> Text(TokenizerPort& tokenizer, const std::vector<int32_t>& ids,
                                 std::string text = "") {
  for (int32_t id : ids) {
    LLM_ASSIGN_OR_RETURN(std::string bytes, tokenizer.TokenBytes(id));
    text += bytes;
  }
  return text;
}

}  // namespace

absl::StatusOr<Turn> ReuseSession(TokenizerPort& tokenizer, ModelPort& model,
                                  std::string_view rendered, const EncodeOptions& encode,
                                  Session& session) {
  if (rendered.empty()) return absl::InvalidArgumentError("the conversation is empty");
  Turn turn;
  // 1. The rendering goes on from the text the session holds.
  if (!session.tokens.empty() && !session.unsynced) {
    LLM_ASSIGN_OR_RETURN(std::string held, Text(tokenizer, session.tokens));
    LLM_ASSIGN_OR_RETURN(held, Text(tokenizer, session.pending, std::move(held)));
    if (rendered.size() > held.size() && rendered.substr(0, held.size()) == held) {
      EncodeOptions rest = encode;
      rest.add_bos = false;
      LLM_ASSIGN_OR_RETURN(std::vector<int32_t> added,
                           tokenizer.Encode(rendered.substr(held.size()), rest));
      if (!added.empty() || !session.pending.empty()) {
        turn.ids = session.tokens;
        turn.ids.insert(turn.ids.end(), session.pending.begin(), session.pending.end());
        turn.ids.insert(turn.ids.end(), added.begin(), added.end());
        turn.held = session.tokens.size();
        session.pending.clear();  // now part of what the turn prefills
        return turn;
      }
    }
  }
  // 2. The longest common token prefix of the session and the rendering.
  LLM_ASSIGN_OR_RETURN(turn.ids, tokenizer.Encode(rendered, encode));
  if (turn.ids.empty()) return absl::InvalidArgumentError("the conversation has no tokens");
  const size_t limit = std::min(session.tokens.size(), turn.ids.size() - 1);
  size_t common = 0;
  while (common < limit && session.tokens[common] == turn.ids[common]) ++common;
  if (common < session.tokens.size() || !session.pending.empty() || session.unsynced) {
    const size_t before = session.tokens.size();
    if (!model.Truncate(session, static_cast<int64_t>(common)).ok()) {
      model.Release(session).IgnoreError();  // start over in a new session
      turn.dropped = before;
      return turn;
    }
    turn.dropped = before - common;
  }
  turn.held = common;
  return turn;
}

}  // namespace llm::client
