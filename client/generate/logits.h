// Logits on the wire, for the client: which encoding to ask the model service
// for, and decoding a response into the sampler's input.
//
// Default (LogitsMode::kAuto): the cheapest encoding that gives the sampler
// exactly what full float32 logits would:
//   - LOGITS_TOP_N with n = sampler::RecommendedTopN(params) when n > 0 and
//     2n < vocab_size (a top-N entry costs 8 bytes, a full logit 4): greedy
//     gets n = 1, top-k sampling n = k (plus spares for penalties and biases);
//   - LOGITS_FLOAT32 otherwise (sampling without top-k, lifting penalties).
// FLOAT16 is never chosen automatically: a half has 11 significant bits, so a
// logit of magnitude 16-32 is rounded by up to 2^-7 = 0.0078, which moves
// probabilities by up to ~0.8% relative and flips near-ties; a seeded run
// would then differ from the full-logits run (docs/client.md). It stays
// available as an explicit choice (half the bytes of float32).
//
// Threads: free functions are thread-safe; a DecodedLogits is one caller's.
#ifndef LLM_CLIENT_GENERATE_LOGITS_H_
#define LLM_CLIENT_GENERATE_LOGITS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/generate/result.h"
#include "llm/v1/model.pb.h"
#include "sampler/sampler.h"

namespace llm::client {

struct LogitsMode {
  enum class Kind { kAuto, kFloat32, kFloat16, kTopN };
  Kind kind = Kind::kAuto;
  int64_t top_n = 0;  // kTopN only: >= 1
};

// "auto", "full" (or "fp32", "float32"), "fp16" (or "float16"), "top-n:N"
// with N >= 1. InvalidArgument otherwise, naming the accepted forms.
absl::StatusOr<LogitsMode> ParseLogitsMode(std::string_view text);
// The inverse, for messages: "auto", "full", "fp16", "top-n:N".
std::string LogitsModeName(const LogitsMode& mode);

// The encoding to request (see the top of this file). top_n is capped to the
// vocabulary size.
v1::LogitsOptions ChooseLogitsOptions(const LogitsMode& mode, const sampler::SamplingParams& params,
                                      int64_t vocab_size);

// The k most likely tokens of `input` under its raw distribution, by
// descending logprob (ties: lower id first), into *out (fewer when the input
// holds fewer, or fewer allowed: a token a mask disallowed, -inf, is never
// listed). Full input: log-softmax in double; top-N input: logit -
// log_sum_exp. Cost: O(vocab + k log k) for full input, O(N log k) for top-N.
void TopLogprobs(const sampler::LogitsInput& input, int32_t k, std::vector<TopLogprob>* out);

// Owns the floats decoded from one Logits message and views them as the
// sampler's input. Reuses its buffers from call to call.
class DecodedLogits {
 public:
  // InvalidArgument (naming the problem) when the message does not hold
  // vocab_size values of its encoding, or top-N ids and logits differ in
  // length. The decoded data stays valid until the next Decode.
  absl::Status Decode(const v1::Logits& logits, int64_t vocab_size);
  const sampler::LogitsInput& input() const { return input_; }

 private:
  std::vector<float> values_;
  std::vector<int32_t> ids_;
  sampler::LogitsInput input_ = sampler::LogitsInput::Full({});
};

}  // namespace llm::client

#endif  // LLM_CLIENT_GENERATE_LOGITS_H_
