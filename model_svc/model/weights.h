// The tensors of a GGUF model, located and shape-checked for its family
// (architecture.h).
//
// Views point into the memory-mapped file; nothing is copied here. Backends
// upload (CUDA) or wrap (CPU) these views at load time. Fused tensors
// (attn_qkv, phi3's gate-and-up ffn_up) become views of their row ranges:
// rows are contiguous, so a range of them is a matrix of its own.
#ifndef LLM_MODEL_SVC_MODEL_WEIGHTS_H_
#define LLM_MODEL_SVC_MODEL_WEIGHTS_H_

#include <vector>

#include "absl/status/statusor.h"
#include "common/gguf/gguf.h"
#include "model_svc/core/weight_view.h"
#include "model_svc/model/config.h"

namespace llm::model {

// Vectors ([n], F32) are views with rows == 1. Optional ones may be absent
// (present() false) as the family allows.
struct LayerWeightViews {
  WeightView attn_norm;       // [d_model], F32
  WeightView wq;              // [q_dim x d_model]
  WeightView wk;              // [kv_dim x d_model]
  WeightView wv;              // [kv_dim x d_model]
  WeightView bq, bk, bv;      // optional biases [q_dim], [kv_dim], [kv_dim]
  WeightView q_norm, k_norm;  // QK-norm weights [head_dim] (arch.qk_norm)
  WeightView wo;              // [d_model x q_dim]
  WeightView post_attn_norm;  // [d_model] (arch.post_norms)
  WeightView ffn_norm;        // [d_model], F32
  WeightView w_gate;          // [d_ff x d_model]
  WeightView w_up;            // [d_ff x d_model]
  WeightView w_down;          // [d_model x d_ff]
  WeightView post_ffn_norm;   // [d_model] (arch.post_norms)
};

struct ModelWeightViews {
  WeightView token_embd;   // [vocab x d_model]
  WeightView output_norm;  // [d_model]
  WeightView output;       // [vocab x d_model]; token_embd when tied
  WeightView rope_freqs;   // optional [rope_dim / 2] (config.rope_freq_factors)
  // Optional [rope_dim / 2] each (config.rope_long_short_factors).
  WeightView rope_factors_long, rope_factors_short;
  std::vector<LayerWeightViews> layers;
};

// Finds every tensor the config needs, checks its shape, and checks that its
// type is one the CPU kernels support (norm vectors must be F32). Errors name
// the tensor, its type and the expected shape; a tensor the family does not
// use is an error naming it too (never ignored: an unused bias would change
// nothing and give wrong output). `file` must outlive the views.
absl::StatusOr<ModelWeightViews> LocateWeights(const gguf::File& file, const ModelConfig& config);

}  // namespace llm::model

#endif  // LLM_MODEL_SVC_MODEL_WEIGHTS_H_
