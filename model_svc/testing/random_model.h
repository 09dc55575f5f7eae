// Test support: small Llama-family GGUF models with random weights.
//
//   RandomModelSpec spec;
//   spec.matrix_type = gguf::TensorType::kQ4_K;
//   spec.d_model = 256;
//   LLM_ASSIGN_OR_RETURN(std::string bytes, RandomModelGguf(spec));
//   auto model = LoadRandomModel(spec, ModelOptions{.kv_blocks = 16}, /*threads=*/2);
//
// The file is what llama.cpp's converter writes for a model of the spec's
// architecture: general.architecture, <arch>.* hyperparameters (UINT32
// counts, FLOAT32 base and epsilon), tensors token_embd.weight,
// output_norm.weight, optional output.weight and blk.N.{attn_norm, attn_q,
// attn_k, attn_v, attn_output, ffn_norm, ffn_gate, ffn_up, ffn_down}.weight,
// each with ggml's ne order [cols, rows], plus the family's extras the spec
// asks for (biases, QK-norm, post-norms, fused tensors, RoPE factors; see
// ArchitectureSpec). No tokenizer metadata.
//
// Weights are N(0, 1/cols) (so each matrix roughly preserves the scale of
// its input) quantized to the requested type with the reference quantizer;
// norm weights are 1 + N(0, 0.1^2). Same spec, same bytes.
#ifndef LLM_MODEL_SVC_TESTING_RANDOM_MODEL_H_
#define LLM_MODEL_SVC_TESTING_RANDOM_MODEL_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/gguf/gguf.h"
#include "model_svc/model/llama_model.h"

namespace llm::model::testing {

// A tensor written zero-filled with this type and shape instead of the
// random one of the same name (or in addition, for a new name); an F32 one
// may be filled with `fill` instead (NaN: a broken model).
struct TensorOverride {
  std::string name;
  gguf::TensorType type = gguf::TensorType::kF32;
  std::vector<int64_t> ne;
  std::optional<float> fill;  // F32 only
};

struct RandomModelSpec {
  std::string architecture = "llama";  // the metadata prefix too ("<arch>.block_count")
  std::string name = "random-llama";   // general.name
  int64_t vocab = 512;
  int64_t d_model = 128;
  int64_t layers = 2;
  int64_t heads = 4;
  int64_t kv_heads = 2;
  int64_t ff = 256;
  int64_t head_dim = 0;  // > 0: writes attention.key_length/value_length; 0: d_model / heads
  int64_t rope_dim = 0;  // rope.dimension_count; 0: the head dimension
  int64_t context = 2048;
  float rope_base = 10000.0f;
  std::string rope_scaling_type;     // non-empty: rope.scaling.type ("linear", "yarn", ...)
  float rope_scaling_factor = 1.0f;  // rope.scaling.factor, written with the type
  float rms_eps = 1e-5f;
  gguf::TensorType matrix_type = gguf::TensorType::kF32;  // every blk.N matrix
  gguf::TensorType embd_type = gguf::TensorType::kF32;    // token_embd.weight
  std::optional<gguf::TensorType> output_type;  // output.weight (untied); default matrix_type
  bool tied = false;                            // no output.weight
  uint64_t seed = 1;

  // Family extras (ArchitectureSpec sets the ones a family has).
  bool qkv_bias = false;       // blk.N.attn_{q,k,v}.bias (attn_qkv.bias when fused)
  bool fused_qkv = false;      // blk.N.attn_qkv.weight instead of attn_q/k/v
  bool qk_norm = false;        // blk.N.attn_{q,k}_norm.weight [head_dim]
  bool post_norms = false;     // blk.N.post_attention_norm / post_ffw_norm
  bool fused_gate_up = false;  // blk.N.ffn_up of 2 x ff rows (gate first), no ffn_gate
  bool rope_freqs = false;     // rope_freqs.weight [rope_dim / 2], factors 1 to 8
  // rope_factors_long / _short.weight (long: 1 to 8, short: 1 to 2), with
  // rope.scaling.original_context_length and rope.scaling.attn_factor.
  bool long_short_factors = false;
  // rope.scaling.original_context_length, written with the long/short
  // factors or rope_scaling_type "yarn".
  int64_t rope_orig_context = 16;
  float rope_attn_factor = 1.19f;
  int64_t sliding_window = 0;  // > 0: <arch>.attention.sliding_window
  // Writes tokenizer.ggml.model = "none", which llama.cpp needs to load a
  // file without a vocabulary (llm-random-model sets it).
  bool no_vocab_key = false;
  // Writes a placeholder SentencePiece vocabulary of `vocab` tokens instead
  // ("<unk>", "<s>", "</s>", the 256 byte tokens "<0x00>".., then "t<id>";
  // scores 0): llama-bench draws random ids below the vocabulary's size and
  // divides by zero on a file without one (the device check's llama.cpp
  // anchor). Needs vocab >= 259.
  bool placeholder_vocab = false;

  // For malformed-file tests.
  std::vector<std::string> omit;          // metadata keys and tensor names left out
  std::vector<TensorOverride> overrides;  // zero-filled (or `fill`ed) replacements
  // Writes the metadata and a zero-filled token_embd.weight only (ModelConfig
  // tests of full-size configurations without building their weights).
  bool config_only = false;

  // The head dimension the file describes.
  int64_t head_dim_or_default() const { return head_dim > 0 ? head_dim : d_model / heads; }
};

// The default spec with `architecture` and its family's extras: llama (with
// rope_freqs, as Llama 3.1 files have), qwen2 (biases), qwen3 (QK-norm),
// gemma3 (QK-norm, post-norms, head_dim 64 != d_model / heads, a sliding
// window of 8 positions, tied embeddings), phi3 (fused QKV and gate/up).
RandomModelSpec ArchitectureSpec(const std::string& architecture);

// SmolLM2-135M-Instruct.Q4_1.gguf's shapes and types (the default model):
// Q4_1 matrices, a Q8_0 embedding tied to the LM head, F32 norms.
RandomModelSpec SmolLm2Shapes();
// Llama-3-8B's shapes (32 layers, vocabulary 128,256), every matrix BF16.
RandomModelSpec Llama3_8bShapes();
// Llama-3.2-1B's shapes (16 layers, hidden 2048, FFN 8192, 32 heads / 8 KV
// heads, vocabulary 128,256, tied embeddings, rope_freqs), as a Q4_K_M file
// is mostly: Q4_K matrices, a Q6_K embedding.
RandomModelSpec Llama3_2_1bShapes();

// The bytes of the GGUF file. Errors: the quantizer cannot write a type or
// shape (e.g. a K-quant with cols not a multiple of 256).
absl::StatusOr<std::string> RandomModelGguf(const RandomModelSpec& spec);

// RandomModelGguf parsed as a gguf::File named "random.gguf".
absl::StatusOr<std::shared_ptr<const gguf::File>> RandomModelFile(const RandomModelSpec& spec);

// Builds, parses and loads the model on a CPU backend with `threads` threads.
absl::StatusOr<std::unique_ptr<LlamaModel>> LoadRandomModel(const RandomModelSpec& spec,
                                                            const ModelOptions& options,
                                                            int threads);

}  // namespace llm::model::testing

#endif  // LLM_MODEL_SVC_TESTING_RANDOM_MODEL_H_
