// A transformer model on a backend: the forward pass, written once for every
// family (architecture.h), which only decides which ops it composes.
//
// One forward serves prefill, decode, chunked prefill and mixed batches: a
// step is several sequences' new tokens flattened into one activation matrix
// (see StepBatch); attention runs per sequence over its own KV blocks.
//
// Threads: not thread-safe; the engine's step loop is its only caller.
// Memory: scratch tensors for `max_step_tokens` rows and the KV pool are
// allocated once in Load; a step allocates nothing on the backend.
#ifndef LLM_MODEL_SVC_MODEL_LLAMA_MODEL_H_
#define LLM_MODEL_SVC_MODEL_LLAMA_MODEL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/gguf/gguf.h"
#include "model_svc/core/backend.h"
#include "model_svc/core/logits.h"
#include "model_svc/model/config.h"
#include "model_svc/model/weights.h"

namespace llm::model {

struct ModelOptions {
  int64_t max_step_tokens = 512;  // rows of one step (the scheduler's token budget)
  int64_t max_logit_rows = 512;   // rows whose logits one step may return
  int32_t kv_blocks = 0;          // KV pool size in blocks (> 0)
  int32_t kv_block_size = 16;
  // F32 here (exact, what the unit tests compare with their reference);
  // the server and tools default to F16 (engine::LoadOptions).
  KvType kv_type = KvType::kF32;
  // The keys' and the values' types, when not kv_type (--kv_cache_type_k,
  // --kv_cache_type_v).
  std::optional<KvType> kv_type_k, kv_type_v;
  KvType k_type() const { return kv_type_k.value_or(kv_type); }
  KvType v_type() const { return kv_type_v.value_or(kv_type); }
  // The longest sequence the model will serve (0: the model's
  // context_length): picks Phi-3's long or short RoPE factors as llama.cpp
  // does from its context size.
  int64_t context_length = 0;
};

class LlamaModel {
 public:
  // Reads the configuration, locates and uploads the weights, allocates
  // scratch and the KV pool. `file` must stay alive (CPU weights point into it).
  static absl::StatusOr<std::unique_ptr<LlamaModel>> Load(std::shared_ptr<const gguf::File> file,
                                                          std::unique_ptr<Backend> backend,
                                                          const ModelOptions& options);

  const ModelConfig& config() const { return config_; }
  const ModelOptions& options() const { return options_; }
  Backend& backend() { return *backend_; }
  // RoPE and attention of `layer` (sliding-window layers differ).
  RopeParams rope_params(int64_t layer = 0) const;
  AttentionParams attention_params(int64_t layer = 0) const;
  const gguf::File& file() const { return *file_; }

  // Runs one step: writes the KV of every new token and returns the logits
  // of batch.logit_rows, encoded as specs[i] (specs.size() == logit_rows.size()),
  // token masks applied (on the host when the backend does not apply them:
  // Backend::AppliesTokenMasks). The caller validates token ids, positions,
  // block tables and that each mask is of the model's vocabulary.
  absl::Status Forward(const StepBatch& batch, std::span<const LogitsSpec> specs,
                       std::vector<Logits>* out);

  // Sees the forward's intermediate tensors, for tools that compare them op
  // by op with another implementation (tools/llm_layers.cc). Called in
  // Forward right after the op that wrote `t` was issued; read it with
  // backend().ReadTensor, and do not keep it: the scratch is reused. `name`
  // is llama.cpp's name for the same tensor in its graph (llm_graph
  // callbacks), `layer` its layer (-1 for the model's output norm):
  // "attn_norm", "Qcur" and "Kcur" (after RoPE, and QK-norm where the family
  // has it), "Vcur", "kqv_out" (attention, before attn_output), "attn_out",
  // "attn_post_norm" (Gemma), "ffn_inp" (the residual after attention),
  // "ffn_norm", "ffn_gate", "ffn_up", "ffn_act" (SwiGLU or GeGLU), "ffn_out"
  // (ffn_down's product), "ffn_post_norm" (Gemma), "l_out" (the layer's
  // output), "result_norm" (of the logit rows only). Rows are the step's
  // rows. Default: none, at the cost of a branch per point.
  using TensorObserver = std::function<void(std::string_view name, int64_t layer, const Tensor& t)>;
  void set_tensor_observer(TensorObserver observer) { observer_ = std::move(observer); }

 private:
  struct Layer {
    std::unique_ptr<Weight> attn_norm, wq, wk, wv, wo, ffn_norm, w_gate, w_up, w_down;
    // Null when the family or the file has none.
    std::unique_ptr<Weight> bq, bk, bv, q_norm, k_norm, post_attn_norm, post_ffn_norm;
  };
  LlamaModel() = default;
  void Observe(std::string_view name, int64_t layer, const Tensor& t) {
    if (observer_) observer_(name, layer, t);
  }
  // Backend::ReadLogits, with the masks of a backend that does not apply
  // them applied here.
  absl::Status ReadLogits(const Tensor& logits, std::span<const LogitsSpec> specs,
                          std::vector<Logits>* out);

  std::shared_ptr<const gguf::File> file_;
  std::unique_ptr<Backend> backend_;
  ModelConfig config_;
  ModelOptions options_;
  std::unique_ptr<Weight> token_embd_, output_norm_, output_;
  // The RoPE factors in use: rope_freqs.weight, or Phi-3's long or short
  // ones for options_.context_length; null when the file has none.
  std::unique_ptr<Weight> rope_freqs_;
  std::vector<Layer> layers_;
  // Scratch, max_step_tokens rows each.
  Tensor x_, xn_, q_, k_, v_, attn_, gate_, up_, act_, last_, logits_;
  // ReadLogits's, kept from step to step: the specs the backend is given, a
  // masked row's float32 values.
  std::vector<LogitsSpec> read_specs_;
  std::vector<float> masked_row_;
  TensorObserver observer_;
};

}  // namespace llm::model

#endif  // LLM_MODEL_SVC_MODEL_LLAMA_MODEL_H_
