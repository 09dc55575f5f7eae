#include "model_svc/engine/loader.h"

#include <utility>

#include "absl/status/status.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "model_svc/backend/backend_factory.h"
#include "model_svc/engine/fingerprint.h"
#include "model_svc/model/llama_model.h"

namespace llm::engine {

absl::StatusOr<std::unique_ptr<Engine>> LoadEngine(const LoadOptions& options) {
  if (options.kv_cache_mb < 1 || options.kv_block_size < 1) {
    return absl::InvalidArgumentError("kv_cache_mb and kv_block_size must be positive");
  }
  if (options.kv_cache_type != "f16" && options.kv_cache_type != "f32") {
    return absl::InvalidArgumentError(
        StrCat("KV cache type \"", options.kv_cache_type, "\" is not supported (f16, f32)"));
  }
  LLM_ASSIGN_OR_RETURN(std::unique_ptr<gguf::File> file, gguf::File::Open(options.model_path));
  std::shared_ptr<const gguf::File> shared(std::move(file));
  LLM_ASSIGN_OR_RETURN(model::ModelConfig config, model::ModelConfig::FromGguf(*shared));
  const uint64_t fingerprint = ModelFingerprint(*shared);

  model::KvCacheShape shape;
  shape.block_size = options.kv_block_size;
  shape.layers = config.block_count;
  shape.kv_dim = config.kv_dim();
  shape.type = options.kv_cache_type == "f32" ? model::KvType::kF32 : model::KvType::kF16;
  const int64_t blocks = options.kv_cache_mb * (int64_t{1} << 20) / shape.block_bytes();
  if (blocks < 1) {
    return absl::InvalidArgumentError(StrCat("--kv_cache_mb ", options.kv_cache_mb,
                                             " holds no KV block of ", shape.block_bytes(),
                                             " bytes"));
  }
  model::ModelOptions mo;
  mo.max_step_tokens = options.engine.max_batch_tokens;
  mo.max_logit_rows = options.engine.max_batch_tokens;
  mo.kv_blocks = static_cast<int32_t>(std::min<int64_t>(blocks, int64_t{1} << 30));
  mo.kv_block_size = options.kv_block_size;
  mo.kv_type = shape.type;
  mo.context_length = options.engine.max_context;
  model::BackendOptions backend_options;
  backend_options.name = options.backend;
  backend_options.threads = options.threads;
  backend_options.cuda_device = options.cuda_device;
  backend_options.cuda_graphs = options.cuda_graphs;
  backend_options.cuda_quantized_weights = options.cuda_quantized_weights;
  backend_options.cpu_mmap_weights = options.mmap_weights;
  backend_options.cpu_pool_cpus = options.compute_cpus;
  LLM_ASSIGN_OR_RETURN(std::unique_ptr<model::Backend> backend,
                       model::CreateBackend(backend_options));
  LLM_ASSIGN_OR_RETURN(std::unique_ptr<model::LlamaModel> model,
                       model::LlamaModel::Load(shared, std::move(backend), mo));
  EngineOptions engine_options = options.engine;
  engine_options.model_fingerprint = fingerprint;
  if (!options.compute_cpus.empty()) {
    engine_options.step_cpus = options.compute_cpus;
    engine_options.callback_cpus = options.callback_cpus;
  }
  return Engine::Create(std::move(model), engine_options);
}

}  // namespace llm::engine
