#include "model_svc/engine/loader.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "model_svc/backend/backend_factory.h"
#include "model_svc/engine/fingerprint.h"
#include "model_svc/model/llama_model.h"

namespace llm::engine {

namespace {

absl::StatusOr<model::KvType> ParseKvType(const std::string& name, const char* flag) {
  if (name == "f16") return model::KvType::kF16;
  if (name == "f32") return model::KvType::kF32;
  if (name == "q8_0") return model::KvType::kQ8_0;
  return absl::InvalidArgumentError(
      StrCat("--", flag, " \"", name, "\" is not a KV cache type (f16, f32, q8_0)"));
}

}  // namespace

absl::StatusOr<model::KvCacheShape> KvPoolShape(const model::ModelConfig& config,
                                                const LoadOptions& options) {
  if (options.kv_cache_mb < 1 || options.kv_block_size < 1) {
    return absl::InvalidArgumentError("kv_cache_mb and kv_block_size must be positive");
  }
  model::KvCacheShape shape;
  LLM_ASSIGN_OR_RETURN(const model::KvType both,
                       ParseKvType(options.kv_cache_type, "kv_cache_type"));
  shape.k_type = shape.v_type = both;
  if (!options.kv_cache_type_k.empty()) {
    LLM_ASSIGN_OR_RETURN(shape.k_type, ParseKvType(options.kv_cache_type_k, "kv_cache_type_k"));
  }
  if (!options.kv_cache_type_v.empty()) {
    LLM_ASSIGN_OR_RETURN(shape.v_type, ParseKvType(options.kv_cache_type_v, "kv_cache_type_v"));
  }
  // (f32 beside another type could leave the values' rows misaligned for
  // floats after an odd number of Q8_0 blocks.)
  if ((shape.k_type == model::KvType::kF32) != (shape.v_type == model::KvType::kF32)) {
    return absl::InvalidArgumentError(
        "a KV cache of f32 holds f32 keys and values: --kv_cache_type_k and --kv_cache_type_v "
        "may mix f16 and q8_0 only");
  }
  const bool q8 = shape.k_type == model::KvType::kQ8_0 || shape.v_type == model::KvType::kQ8_0;
  if (q8 && config.head_dim % 32 != 0) {
    return absl::InvalidArgumentError(
        StrCat("a q8_0 KV cache needs a head dimension that is a "
               "multiple of 32; this model's is ",
               config.head_dim));
  }
  shape.block_size = options.kv_block_size;
  shape.layers = config.block_count;
  shape.kv_dim = config.kv_dim();
  const int64_t blocks = options.kv_cache_mb * (int64_t{1} << 20) / shape.block_bytes();
  if (blocks < 1) {
    return absl::InvalidArgumentError(StrCat("--kv_cache_mb ", options.kv_cache_mb,
                                             " holds no KV block of ", shape.block_bytes(),
                                             " bytes"));
  }
  shape.num_blocks = static_cast<int32_t>(std::min<int64_t>(blocks, int64_t{1} << 30));
  return shape;
}

absl::StatusOr<std::unique_ptr<Engine>> LoadEngine(const LoadOptions& options) {
  LLM_ASSIGN_OR_RETURN(std::unique_ptr<gguf::File> file, gguf::File::Open(options.model_path));
  std::shared_ptr<const gguf::File> shared(std::move(file));
  LLM_ASSIGN_OR_RETURN(model::ModelConfig config, model::ModelConfig::FromGguf(*shared));
  const uint64_t fingerprint = ModelFingerprint(*shared);
  LLM_ASSIGN_OR_RETURN(const model::KvCacheShape shape, KvPoolShape(config, options));

  model::ModelOptions mo;
  mo.max_step_tokens = options.engine.max_batch_tokens;
  mo.max_logit_rows = options.engine.max_batch_tokens;
  mo.kv_blocks = shape.num_blocks;
  mo.kv_block_size = options.kv_block_size;
  mo.kv_type = shape.k_type;
  mo.kv_type_v = shape.v_type;
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
