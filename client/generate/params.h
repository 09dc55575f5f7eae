// What one generation is asked for: sampling and when to stop.
#ifndef LLM_CLIENT_GENERATE_PARAMS_H_
#define LLM_CLIENT_GENERATE_PARAMS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "sampler/sampler.h"

namespace llm::client {

struct GenerateParams {
  sampler::SamplingParams sampling;
  int32_t max_tokens = 256;       // >= 1
  std::vector<std::string> stop;  // non-empty strings
  bool ignore_eos = false;        // keep going past EOS / EOT (benchmarks)
};

// InvalidArgument naming the field: sampler::Validate, max_tokens < 1, an
// empty stop string.
absl::Status ValidateParams(const GenerateParams& params);

}  // namespace llm::client

#endif  // LLM_CLIENT_GENERATE_PARAMS_H_
