// What one generation gives: a callback per token, and the result at the end.
#ifndef LLM_CLIENT_GENERATE_RESULT_H_
#define LLM_CLIENT_GENERATE_RESULT_H_

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/time/time.h"
#include "llm/v1/model.pb.h"

namespace llm::client {

// kContext: the model session is full (ModelPort::context_length tokens, or a
// decode step answered OUT_OF_RANGE): the last token was sampled from the
// logits of the last position and is not fed (it is in Session::pending).
enum class StopReason { kEos, kStopString, kMaxTokens, kCancelled, kContext };
// "eos", "stop", "length", "cancelled", "context".
std::string_view StopReasonName(StopReason reason);

// A token and its log-probability under the model's own distribution (the
// raw logits' log-softmax: before bias, penalties, temperature and filters).
struct TopLogprob {
  int32_t token = 0;
  float logprob = 0.0f;
};

// One callback per generated token, in order, plus at most one at the end of
// the stream (token -1) when held-back text is released then.
struct TokenEvent {
  std::string_view text;  // text released now: valid UTF-8, possibly empty
  int32_t token = -1;     // the token; -1: end of stream
  float logprob = 0.0f;   // log p(token) under the model (sampler::Sample)
  // GenerateParams::top_logprobs most likely tokens at this position, by
  // descending logprob (ties: lower id first); valid during the callback.
  std::span<const TopLogprob> top;
  // The first event of a generation only: GenerateResult::prompt_logprobs
  // so far (a streamed echo can show them before the generated text).
  std::span<const v1::TokenLogprob> prompt_logprobs;
};
using TokenCallback = std::function<void(const TokenEvent&)>;

struct GenerateResult {
  std::vector<int32_t> tokens;  // generated, without the EOS / EOT that ended it
  std::string text;             // all released text (what the callback got)
  StopReason stop_reason = StopReason::kMaxTokens;
  std::string stop_string;             // kStopString: the stop string that ended it
  int64_t prompt_tokens = 0;           // new tokens prefilled by this call
  int64_t cached_tokens = 0;           // of them, found in the model server's prefix cache
  int64_t kept_tokens = 0;             // of them, a named session's model session held already
  absl::Duration time_to_first_token;  // Generate's start to the first sampled token
  absl::Duration decode_time;          // first sampled token to the last
  int32_t session_rebuilds = 0;        // lost sessions re-prefilled
  int32_t session_relocations = 0;     // times the session was found moved (Session::relocations)
  int32_t inexact_samples = 0;         // samples with !Sample::exact (forced top-N)
  // Speculation (GenerateParams::speculate): tokens proposed to the model,
  // and how many of them the generation kept.
  int64_t proposed_tokens = 0;
  int64_t accepted_tokens = 0;
  // Structured generation (GenerateParams::constraint): generated tokens the
  // grammar forced (the only continuation it admits), fed without sampling,
  // several in one step.
  int64_t forced_tokens = 0;
  v1::LogitsOptions logits;  // the encoding used
  // With GenerateParams::prompt_logprobs >= 0: the scores of the prefilled
  // tokens after the first (PrefillResult::prompt_logprobs).
  std::vector<v1::TokenLogprob> prompt_logprobs;

  // Decode rate: tokens after the first per second of decode_time (0 if < 2).
  double tokens_per_second() const;
};

}  // namespace llm::client

#endif  // LLM_CLIENT_GENERATE_RESULT_H_
