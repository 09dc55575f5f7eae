#include "client/generate/params.h"

#include "client/generate/stop_strings.h"
#include "common/status_macros.h"
#include "common/strings.h"

namespace llm::client {

absl::Status ValidateParams(const GenerateParams& params) {
  LLM_RETURN_IF_ERROR(sampler::Validate(params.sampling));
  if (params.max_tokens < 1) {
    return absl::InvalidArgumentError(StrCat("max_tokens must be >= 1, got ", params.max_tokens));
  }
  if (params.top_logprobs < 0 || params.top_logprobs > kMaxTopLogprobs) {
    return absl::InvalidArgumentError(
        StrCat("top_logprobs must be in [0, ", kMaxTopLogprobs, "], got ", params.top_logprobs));
  }
  if (params.prompt_logprobs < -1 || params.prompt_logprobs > kMaxTopLogprobs) {
    return absl::InvalidArgumentError(StrCat("prompt_logprobs must be in [-1, ", kMaxTopLogprobs,
                                             "], got ", params.prompt_logprobs));
  }
  if (params.speculate < 0 || params.speculate > kMaxProposedTokens) {
    return absl::InvalidArgumentError(
        StrCat("speculate must be in [0, ", kMaxProposedTokens, "], got ", params.speculate));
  }
  if (params.constraint != nullptr && params.ignore_eos) {
    return absl::InvalidArgumentError(
        "ignore_eos cannot be combined with a constraint (the end of a grammar is its EOS)");
  }
  return ValidateStopStrings(params.stop);
}

}  // namespace llm::client
