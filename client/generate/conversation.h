// How a conversation's turn reuses the model session that holds its earlier
// turns: the one policy of `llm chat` (chat_session.h) and of the gateway's
// conversations (X-Session-Id).
//
// Every turn brings the whole conversation, rendered by the chat template
// (`rendered`), as a request without a session would send it. Then:
//
//   1. When the rendering begins with the text the session holds (the
//      bytes of its tokens, and of the pending ones, sampled but not fed),
//      the session keeps all of it and the turn prefills only the encoding
//      of the rest. The model goes on from the tokens it generated itself,
//      even where they are not how the tokenizer would encode that text.
//      This is every turn of a chat whose template renders earlier turns as
//      they were (ChatML, Llama 3, Gemma, raw).
//   2. Otherwise (a template that re-renders earlier turns: Qwen3 drops old
//      reasoning, Llama 3.1 trims messages; an answer cut at a stop string
//      whose tokens the session holds; an edited history), the rendering is
//      encoded whole, the session keeps the longest token prefix it shares
//      with it (at most all but the last id: a turn prefills at least one
//      token, for the next token's logits) and is truncated there, as
//      llama.cpp's server and vLLM reuse a prompt's KV.
//
// Threads: the caller's (one session, one caller). Cost: the session's
// token bytes (TokenizerPort::TokenBytes, cached), one Encode call, and at
// most one Truncate call.
#ifndef LLM_CLIENT_GENERATE_CONVERSATION_H_
#define LLM_CLIENT_GENERATE_CONVERSATION_H_

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "client/generate/ports.h"

namespace llm::client {

struct Turn {
  // The conversation as the session will hold it after the turn's prefill.
  std::vector<int32_t> ids;
  // How many of `ids` the session holds already: the turn prefills the rest.
  size_t held = 0;
  // The session was cut back (case 2 above) and dropped this many tokens.
  size_t dropped = 0;
};

// Prepares `session` for a turn whose whole conversation is `rendered`
// (encoded with `encode`; its add_bos applies to the start of the
// conversation only). Errors: the tokenizer's; an empty rendering is
// InvalidArgument. A truncation that fails releases the session, and the
// turn starts a new one (held 0).
absl::StatusOr<Turn> ReuseSession(TokenizerPort& tokenizer, ModelPort& model,
                                  std::string_view rendered, const EncodeOptions& encode,
                                  Session& session);

}  // namespace llm::client

#endif  // LLM_CLIENT_GENERATE_CONVERSATION_H_
