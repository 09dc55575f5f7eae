// What distinguishes one transformer family from another, as data: the
// forward pass (llama_model.cc) is written once and reads these fields to
// decide which ops to compose. A family is a row of a table here, not a copy
// of the forward; adding one is adding a row (and, if it needs an op the
// backends lack, that op).
//
// Families (GGUF general.architecture):
//   llama   Llama 1-3.x, Mistral, SmolLM, TinyLlama: SwiGLU, adjacent-pair
//           RoPE (GGUF permutes Q/K rows for it); optional rope_freqs.weight
//           (Llama 3.1+ per-frequency factors) and Q/K/V biases.
//   qwen2   Qwen 2 / 2.5: llama + Q/K/V biases, NEOX RoPE.
//   qwen3   Qwen 3: llama + per-head RMSNorm of Q and K (QK-norm), NEOX RoPE.
//   gemma3  Gemma 3: embeddings scaled by sqrt(d_model), GeGLU (tanh GELU),
//           QK-norm, RMSNorm of the attention and FFN outputs before their
//           residual adds, NEOX RoPE, sliding-window attention on five layers
//           of every six with their own RoPE base (10,000), tied embeddings.
//   phi3    Phi-3 / 3.5: fused attn_qkv and fused gate/up (ffn_up with 2 x
//           d_ff rows, gate first), NEOX RoPE; the 128k variants' long and
//           short RoPE factors, and rope.scaling.attn_factor.
// Any of them may store Q, K and V fused (attn_qkv.weight), as llama.cpp
// accepts.
//
// Threads: immutable; share freely.
#ifndef LLM_MODEL_SVC_MODEL_ARCHITECTURE_H_
#define LLM_MODEL_SVC_MODEL_ARCHITECTURE_H_

#include <string>
#include <string_view>

namespace llm::model {

// How RoPE pairs a head's dimensions.
enum class RopeStyle {
  kNormal,  // adjacent pairs (2i, 2i + 1): llama (GGUF permutes Q and K rows)
  kNeox,    // halves (i, i + rope_dim / 2): qwen, gemma, phi
};

// The gated feed-forward activation: out = act(gate) * up.
enum class FfnActivation {
  kSilu,      // SwiGLU
  kGeluTanh,  // GeGLU with the tanh approximation of GELU
};

struct Architecture {
  std::string_view name;  // general.architecture
  RopeStyle rope_style = RopeStyle::kNormal;
  FfnActivation activation = FfnActivation::kSilu;
  bool embedding_scale_sqrt_d = false;  // x = embd * sqrt(d_model)
  bool qk_norm = false;                 // attn_q_norm / attn_k_norm, required
  bool post_norms = false;              // post_attention_norm / post_ffw_norm, required
  bool fused_gate_up = false;           // ffn_up holds gate and up; no ffn_gate
  bool qkv_bias_allowed = false;        // attn_{q,k,v}.bias (or attn_qkv.bias) may be present
  bool rope_freqs_allowed = false;      // rope_freqs.weight may be present
  // rope_factors_long / rope_factors_short.weight may be present (Phi-3's
  // long-context variants): the long ones when the context served exceeds
  // rope.scaling.original_context_length, as llama.cpp chooses.
  bool long_short_factors_allowed = false;
  // Sliding-window attention when the file sets attention.sliding_window:
  // every layer but each swa_pattern-th (layer % swa_pattern == swa_pattern - 1)
  // attends to the last sliding_window positions, with RoPE base
  // swa_rope_base (the file's rope.freq_base.swa, if present). 0: none.
  int swa_pattern = 0;
  float swa_rope_base = 10000.0f;
};

// The row for `name`, or null when the family is not supported.
const Architecture* FindArchitecture(std::string_view name);

// "llama, qwen2, qwen3, gemma3, phi3": for error messages.
std::string SupportedArchitectures();

}  // namespace llm::model

#endif  // LLM_MODEL_SVC_MODEL_ARCHITECTURE_H_
