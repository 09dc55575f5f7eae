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
  return ValidateStopStrings(params.stop);
}

}  // namespace llm::client
