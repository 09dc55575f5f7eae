// A model's configuration, read from a GGUF file's metadata: the family's
// description (architecture.h) and its hyperparameters.
#ifndef LLM_MODEL_SVC_MODEL_CONFIG_H_
#define LLM_MODEL_SVC_MODEL_CONFIG_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/gguf/gguf.h"
#include "model_svc/model/architecture.h"

namespace llm::model {

struct ModelConfig {
  std::string architecture;  // general.architecture, e.g. "llama"
  Architecture arch;         // the family's row (architecture.h)
  std::string name;          // general.name, or "" when absent
  int64_t vocab_size = 0;    // rows of token_embd.weight
  int64_t context_length = 0;
  int64_t embedding_length = 0;     // d_model
  int64_t block_count = 0;          // layers
  int64_t feed_forward_length = 0;  // gated FFN hidden size
  int64_t head_count = 0;
  int64_t head_count_kv = 0;
  int64_t head_dim = 0;  // embedding_length / head_count unless key_length says
  int64_t rope_dim = 0;  // rotated dimensions per head (<= head_dim)
  float rope_freq_base = 10000.0f;
  // Linear position scaling: positions are multiplied by this (1 / factor).
  float rope_freq_scale = 1.0f;
  float rms_eps = 1e-5f;
  bool tied_embeddings = false;    // output.weight absent: LM head = token_embd
  bool rope_freq_factors = false;  // rope_freqs.weight: theta_i divided by factor i
  // rope_factors_long / _short.weight (arch.long_short_factors_allowed): the
  // long ones serve contexts above rope_orig_context.
  bool rope_long_short_factors = false;
  int64_t rope_orig_context = 0;  // rope.scaling.original_context_length, or context_length
  float rope_attn_factor = 1.0f;  // rope.scaling.attn_factor: cos and sin are scaled by it
  // rope.scaling.type = yarn: YaRN's extrapolation mix between the
  // correction dimensions (llama.cpp's corr_dims), its magnitude scale folded
  // into rope_attn_factor above.
  bool rope_yarn = false;
  float rope_yarn_corr_low = 0.0f, rope_yarn_corr_high = 0.0f;
  // Scores are (q . k) * attention_scale: 1 / sqrt(head_dim).
  float attention_scale = 0.0f;
  // Sliding-window attention (arch.swa_pattern): window in positions, 0 when
  // every layer attends to the whole context; RoPE base of those layers.
  int64_t sliding_window = 0;
  float rope_freq_base_swa = 10000.0f;

  // Whether `layer` attends through the sliding window.
  bool IsSlidingLayer(int64_t layer) const {
    return sliding_window > 0 && arch.swa_pattern > 0 &&
           layer % arch.swa_pattern < arch.swa_pattern - 1;
  }

  int64_t q_dim() const { return head_count * head_dim; }
  int64_t kv_dim() const { return head_count_kv * head_dim; }
  int64_t group_size() const { return head_count / head_count_kv; }

  // Reads `<arch>.*` keys and checks them against each other and the tensor
  // shapes. Architectures: see architecture.h. Errors name the file and the
  // key; an unsupported family or RoPE scaling is UNIMPLEMENTED.
  static absl::StatusOr<ModelConfig> FromGguf(const gguf::File& file);
};

}  // namespace llm::model

#endif  // LLM_MODEL_SVC_MODEL_CONFIG_H_
