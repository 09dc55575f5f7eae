// Builds a ready engine from a GGUF path: the one way the server and the
// tools load a model.
#ifndef LLM_MODEL_SVC_ENGINE_LOADER_H_
#define LLM_MODEL_SVC_ENGINE_LOADER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model_svc/core/kv_cache_shape.h"
#include "model_svc/engine/engine.h"
#include "model_svc/model/config.h"

namespace llm::engine {

struct LoadOptions {
  std::string model_path;
  std::string backend = "cpu";  // "cpu", "cuda" or "auto" (backend_factory.h)
  int threads = 0;              // CPU threads; 0: every core the process may use
  // The forward pass's threads' CPUs: the engine's step loop and, with the
  // CPU backend, its pool's workers; empty: their creator's. With them,
  // callback_cpus: the step loop's CPUs while it runs the completion
  // callbacks (EngineOptions::callback_cpus).
  std::vector<int> compute_cpus;
  std::vector<int> callback_cpus;
  int cuda_device = 0;
  bool cuda_graphs = true;             // decode steps as CUDA graphs
  bool cuda_quantized_weights = true;  // Q8_0/Q4_0/Q4_1/Q4_K/Q5_K/Q6_K kept quantized on the GPU
  bool mmap_weights = false;           // CPU: compute from the file mapping (no copy)
  int64_t kv_cache_mb = 512;           // KV pool size; blocks = MiB / block bytes
  int32_t kv_block_size = 16;          // positions per KV block
  // The KV cache's element types: "f16", "f32" or "q8_0" (GGUF's Q8_0
  // blocks; head dimension a multiple of 32), for keys and values
  // (kv_cache_type), or for each (kv_cache_type_k / _v, when not empty).
  // f32 is for both or neither.
  std::string kv_cache_type = "f16";
  std::string kv_cache_type_k, kv_cache_type_v;
  EngineOptions engine;  // engine.max_batch_tokens also sizes the step scratch
};

// The KV pool LoadEngine allocates for a model of `config`: the types
// (INVALID_ARGUMENT for an unknown or unsupported one) and as many blocks as
// kv_cache_mb holds (INVALID_ARGUMENT when none).
absl::StatusOr<model::KvCacheShape> KvPoolShape(const model::ModelConfig& config,
                                                const LoadOptions& options);

// Maps the file, loads the weights on the backend, allocates the KV pool and
// starts the engine. Errors name the file and the problem.
absl::StatusOr<std::unique_ptr<Engine>> LoadEngine(const LoadOptions& options);

}  // namespace llm::engine

#endif  // LLM_MODEL_SVC_ENGINE_LOADER_H_
