// The logprobs objects of OpenAI's API, from token texts and log-probabilities
// (the model's own distribution: client/generate/result.h's TopLogprob).
//
//   chat:        "logprobs": {"content": [{"token", "logprob", "bytes",
//                 "top_logprobs": [{"token", "logprob", "bytes"}, ...]}, ...],
//                 "refusal": null}
//   completions: "logprobs": {"tokens": [...], "token_logprobs": [...],
//                 "top_logprobs": [{text: logprob, ...}, ...], "text_offset": [...]}
//
// A token's text is its bytes; bytes that are not valid UTF-8 on their own (a
// character split across tokens) become U+FFFD when the JSON is written,
// while "bytes" (chat) keeps them exactly. text_offset counts bytes of the
// choice's text up to the token.
#ifndef LLM_GATEWAY_LOGPROBS_JSON_H_
#define LLM_GATEWAY_LOGPROBS_JSON_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
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

// One entry of a chat choice's logprobs.content.
nlohmann::json ChatLogprobEntry(const TokenScore& score);

// {"content": entries, "refusal": null}.
nlohmann::json ChatLogprobs(nlohmann::json entries);

// A completions choice's logprobs, one token at a time.
class CompletionLogprobs {
 public:
  // `offset`: the bytes of the choice's text before the first token added.
  explicit CompletionLogprobs(int64_t offset = 0) : offset_(offset) {}
  void Add(const TokenScore& score);
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
