// The logprobs objects of OpenAI's API, from token texts and log-probabilities
// (the model's own distribution: client/generate/result.h's TopLogprob).
//
//   chat:        "logprobs": {"content": [{"token", "logprob", "bytes",
//                 "top_logprobs": [{"token", "logprob", "bytes"}, ...]}, ...],
//                 "refusal": null}
//   completions: "logprobs": {"tokens": [...], "token_logprobs": [...],
//                 "top_logprobs": [{text: logprob, ...}, ...], "text_offset": [...]}
//
// A token's "token" string (and a completions top_logprobs key) is its text
// when its bytes are valid UTF-8; a token that is not (a character split
// across tokens) is written as OpenAI writes it: "bytes:" and the bytes as
// Python shows a bytes object's contents, "bytes:\xe4\xb8" (TokenString).
// "bytes" (chat) lists the bytes exactly. text_offset counts bytes (UTF-8)
// of the choice's text up to the token; a completions top_logprobs entry
// also lists the token at its position when it is not among the most
// likely ones (up to logprobs + 1 entries, as OpenAI's and vLLM's).
#ifndef LLM_GATEWAY_LOGPROBS_JSON_H_
#define LLM_GATEWAY_LOGPROBS_JSON_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace llm::gateway {

// One position: the token there, its logprob (none for a prompt's first
// token, which nothing precedes), and the most likely tokens there.
struct TokenScore {
  std::string text;                                // the token's bytes
  std::optional<float> logprob;                    // nullopt: none
  std::vector<std::pair<std::string, float>> top;  // (bytes, logprob), most likely first
};

// The "token" string of a token's bytes (see above).
std::string TokenString(std::string_view bytes);

// One entry of a chat choice's logprobs.content.
nlohmann::json ChatLogprobEntry(const TokenScore& score);

// {"content": entries, "refusal": null}.
nlohmann::json ChatLogprobs(nlohmann::json entries);

// A completions choice's logprobs, one token at a time.
class CompletionLogprobs {
 public:
  // `offset`: the bytes of the choice's text before the first token added.
  explicit CompletionLogprobs(int64_t offset = 0) : offset_(offset) {}
  // `text_bytes`: how many of the token's bytes the choice's text holds
  // (the next token's offset is this much further); nullopt: all of them.
  // (An echoed prompt's BOS, which the text does not show: 0.)
  void Add(const TokenScore& score, std::optional<int64_t> text_bytes = std::nullopt);
  // The object so far (each list in token order).
  nlohmann::json ToJson() const;
  // The object of the tokens added since the last Take(), for one streamed
  // event; those tokens are then forgotten (offsets go on counting).
  nlohmann::json Take();

 private:
  int64_t offset_;
  nlohmann::json tokens_ = nlohmann::json::array();
  nlohmann::json token_logprobs_ = nlohmann::json::array();
  nlohmann::json top_logprobs_ = nlohmann::json::array();
  nlohmann::json text_offset_ = nlohmann::json::array();
};

}  // namespace llm::gateway

#endif  // LLM_GATEWAY_LOGPROBS_JSON_H_
