// Backend flags that model_server, llm-bench and llm-perplexity all take,
// defined once. A binary links llm_backend_flags and, after llm::ParseFlags,
// copies them into its LoadOptions with ApplyBackendFlags.
#ifndef LLM_MODEL_SVC_ENGINE_BACKEND_FLAGS_H_
#define LLM_MODEL_SVC_ENGINE_BACKEND_FLAGS_H_

#include <string>

#include "absl/flags/declare.h"
#include "model_svc/engine/loader.h"

ABSL_DECLARE_FLAG(bool, cuda_graphs);
ABSL_DECLARE_FLAG(bool, cuda_quantized_weights);
ABSL_DECLARE_FLAG(bool, mmap_weights);
ABSL_DECLARE_FLAG(std::string, kv_cache_type);
ABSL_DECLARE_FLAG(std::string, kv_cache_type_k);
ABSL_DECLARE_FLAG(std::string, kv_cache_type_v);

namespace llm::engine {

// Sets options->cuda_graphs, cuda_quantized_weights, mmap_weights and
// kv_cache_type(_k, _v) from the flags.
void ApplyBackendFlags(LoadOptions* options);

}  // namespace llm::engine

#endif  // LLM_MODEL_SVC_ENGINE_BACKEND_FLAGS_H_
