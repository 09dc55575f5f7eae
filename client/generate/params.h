// What one generation is asked for: sampling and when to stop.
#ifndef LLM_CLIENT_GENERATE_PARAMS_H_
#define LLM_CLIENT_GENERATE_PARAMS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "client/constrain/constraint.h"
#include "sampler/sampler.h"

namespace llm::client {

struct GenerateParams {
  sampler::SamplingParams sampling;
  int32_t max_tokens = 256;       // >= 1
  std::vector<std::string> stop;  // non-empty strings
  bool ignore_eos = false;        // keep going past EOS / EOT (benchmarks)
  // How many of the most likely tokens each TokenEvent lists (TokenEvent::
  // top), 0..kMaxTopLogprobs. The logits asked for then carry at least
  // that many (a top-N encoding grows to it).
  int32_t top_logprobs = 0;
  // >= 0: score the prefilled tokens (GenerateResult::prompt_logprobs) with
  // this many alternatives each, 0..kMaxTopLogprobs; -1: off.
  int32_t prompt_logprobs = -1;
  // Speculative decoding: each decode step proposes up to this many tokens
  // after the sampled one, found by n-gram lookup in the conversation
  // (ngram_proposer.h); the model computes them in the same step, and the
  // ones the sampler agrees with are kept (generate_loop.h, "Speculation":
  // the output is the same, token for token, only faster when proposals
  // are accepted). 0..kMaxProposedTokens (16); 0: off.
  int32_t speculate = 0;
  // Structured generation: the tokens generated are those this compiled
  // constraint (a JSON schema, a regex, a grammar, choices:
  // client/constrain/constraint.h) allows, drawn exactly from the model's
  // distribution restricted to them (the model service masks the logits:
  // StepOptions::mask); where the grammar admits one continuation only, its
  // tokens are fed without sampling (GenerateResult::forced_tokens). Null:
  // none. The constraint must be compiled for the model's vocabulary.
  std::shared_ptr<const constrain::Constraint> constraint;
};

// The most alternatives a position may list (the model service's limit for
// prompt scores, and OpenAI's top_logprobs).
inline constexpr int32_t kMaxTopLogprobs = 20;
// The most tokens one decode step may propose (GenerateParams::speculate;
// the model service's limit, DecodeTokenRequest.proposed).
inline constexpr int32_t kMaxProposedTokens = 16;

// InvalidArgument naming the field: sampler::Validate, max_tokens < 1, an
// empty stop string, top_logprobs, prompt_logprobs or speculate out of
// range.
absl::Status ValidateParams(const GenerateParams& params);

}  // namespace llm::client

#endif  // LLM_CLIENT_GENERATE_PARAMS_H_
