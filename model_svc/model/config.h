// Llama-family model configuration, read from a GGUF file's metadata.
#ifndef LLM_MODEL_SVC_MODEL_CONFIG_H_
#define LLM_MODEL_SVC_MODEL_CONFIG_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/gguf/gguf.h"

namespace llm::model {

struct ModelConfig {
  std::string architecture;  // general.architecture, e.g. "llama"
  std::string name;          // general.name, or "" when absent
  int64_t vocab_size = 0;    // rows of token_embd.weight
  int64_t context_length = 0;
  int64_t embedding_length = 0;     // d_model
  int64_t block_count = 0;          // layers
  int64_t feed_forward_length = 0;  // SwiGLU hidden size
  int64_t head_count = 0;
  int64_t head_count_kv = 0;
  int64_t head_dim = 0;  // embedding_length / head_count unless key_length says
  int64_t rope_dim = 0;  // rotated dimensions per head (<= head_dim)
  float rope_freq_base = 10000.0f;
  // Linear position scaling: positions are multiplied by this (1 / factor).
  float rope_freq_scale = 1.0f;
  float rms_eps = 1e-5f;
  bool tied_embeddings = false;  // output.weight absent: LM head = token_embd

  int64_t q_dim() const { return head_count * head_dim; }
  int64_t kv_dim() const { return head_count_kv * head_dim; }
  int64_t group_size() const { return head_count / head_count_kv; }

  // Reads `<arch>.*` keys and checks them against each other and the tensor
  // shapes. Architectures: llama (Llama 1-3, Mistral, SmolLM, TinyLlama).
  // Errors name the file and the key.
  static absl::StatusOr<ModelConfig> FromGguf(const gguf::File& file);
};

}  // namespace llm::model

#endif  // LLM_MODEL_SVC_MODEL_CONFIG_H_
