// The tensors of a Llama-family GGUF model, located and shape-checked.
//
// Views point into the memory-mapped file; nothing is copied here. Backends
// upload (CUDA) or wrap (CPU) these views at load time.
#ifndef LLM_MODEL_SVC_MODEL_WEIGHTS_H_
#define LLM_MODEL_SVC_MODEL_WEIGHTS_H_

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/gguf/gguf.h"
#include "model_svc/model/config.h"

namespace llm::model {

// One matrix (or vector, rows == 1) as stored: `rows` rows of `cols`
// elements, row-major, in GGUF tensor type `type`.
struct WeightView {
  std::string_view name;
  gguf::TensorType type = gguf::TensorType::kF32;
  int64_t rows = 0;  // ne[1]: output features
  int64_t cols = 0;  // ne[0]: input features
  const uint8_t* data = nullptr;
  size_t row_bytes = 0;
};

struct LayerWeightViews {
  WeightView attn_norm;  // [d_model], F32
  WeightView wq;         // [q_dim x d_model]
  WeightView wk;         // [kv_dim x d_model]
  WeightView wv;         // [kv_dim x d_model]
  WeightView wo;         // [d_model x q_dim]
  WeightView ffn_norm;   // [d_model], F32
  WeightView w_gate;     // [d_ff x d_model]
  WeightView w_up;       // [d_ff x d_model]
  WeightView w_down;     // [d_model x d_ff]
};

struct ModelWeightViews {
  WeightView token_embd;   // [vocab x d_model]
  WeightView output_norm;  // [d_model]
  WeightView output;       // [vocab x d_model]; token_embd when tied
  std::vector<LayerWeightViews> layers;
};

// Finds every tensor the config needs, checks its shape, and checks that its
// type is one the CPU kernels support (norm vectors must be F32). Errors name
// the tensor, its type and the expected shape. `file` must outlive the views.
absl::StatusOr<ModelWeightViews> LocateWeights(const gguf::File& file, const ModelConfig& config);

}  // namespace llm::model

#endif  // LLM_MODEL_SVC_MODEL_WEIGHTS_H_
