#include "model_svc/model/llama_model.h"

#include <cmath>
#include <utility>

#include "absl/status/status.h"
#include "common/status_macros.h"
#include "common/strings.h"

namespace llm::model {

absl::StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::Load(std::shared_ptr<const gguf::File> file,
                                                             std::unique_ptr<Backend> backend,
                                                             const ModelOptions& options) {
  if (options.max_step_tokens < 1 || options.max_logit_rows < 1 || options.kv_blocks < 1 ||
      options.kv_block_size < 1) {
    return absl::InvalidArgumentError(
        "model options: step tokens, logit rows, KV blocks and "
        "block size must be positive");
  }
  std::unique_ptr<LlamaModel> m(new LlamaModel);
  m->file_ = std::move(file);
  m->backend_ = std::move(backend);
  m->options_ = options;
  LLM_ASSIGN_OR_RETURN(m->config_, ModelConfig::FromGguf(*m->file_));
  LLM_ASSIGN_OR_RETURN(ModelWeightViews views, LocateWeights(*m->file_, m->config_));
  Backend& b = *m->backend_;
  LLM_RETURN_IF_ERROR(b.CheckModel(m->attention_params(), m->rope_params()));
  LLM_ASSIGN_OR_RETURN(m->token_embd_, b.UploadWeight(views.token_embd));
  LLM_ASSIGN_OR_RETURN(m->output_norm_, b.UploadWeight(views.output_norm));
  LLM_ASSIGN_OR_RETURN(m->output_, b.UploadWeight(views.output));
  for (const LayerWeightViews& v : views.layers) {
    Layer l;
    LLM_ASSIGN_OR_RETURN(l.attn_norm, b.UploadWeight(v.attn_norm));
    LLM_ASSIGN_OR_RETURN(l.wq, b.UploadWeight(v.wq));
    LLM_ASSIGN_OR_RETURN(l.wk, b.UploadWeight(v.wk));
    LLM_ASSIGN_OR_RETURN(l.wv, b.UploadWeight(v.wv));
    LLM_ASSIGN_OR_RETURN(l.wo, b.UploadWeight(v.wo));
    LLM_ASSIGN_OR_RETURN(l.ffn_norm, b.UploadWeight(v.ffn_norm));
    LLM_ASSIGN_OR_RETURN(l.w_gate, b.UploadWeight(v.w_gate));
    LLM_ASSIGN_OR_RETURN(l.w_up, b.UploadWeight(v.w_up));
    LLM_ASSIGN_OR_RETURN(l.w_down, b.UploadWeight(v.w_down));
    m->layers_.push_back(std::move(l));
  }
  const ModelConfig& c = m->config_;
  const int64_t n = options.max_step_tokens;
  LLM_ASSIGN_OR_RETURN(m->x_, b.AllocTensor(n, c.embedding_length));
  LLM_ASSIGN_OR_RETURN(m->xn_, b.AllocTensor(n, c.embedding_length));
  LLM_ASSIGN_OR_RETURN(m->q_, b.AllocTensor(n, c.q_dim()));
  LLM_ASSIGN_OR_RETURN(m->k_, b.AllocTensor(n, c.kv_dim()));
  LLM_ASSIGN_OR_RETURN(m->v_, b.AllocTensor(n, c.kv_dim()));
  LLM_ASSIGN_OR_RETURN(m->attn_, b.AllocTensor(n, c.q_dim()));
  LLM_ASSIGN_OR_RETURN(m->gate_, b.AllocTensor(n, c.feed_forward_length));
  LLM_ASSIGN_OR_RETURN(m->up_, b.AllocTensor(n, c.feed_forward_length));
  LLM_ASSIGN_OR_RETURN(m->act_, b.AllocTensor(n, c.feed_forward_length));
  LLM_ASSIGN_OR_RETURN(m->last_, b.AllocTensor(options.max_logit_rows, c.embedding_length));
  LLM_ASSIGN_OR_RETURN(m->logits_, b.AllocTensor(options.max_logit_rows, c.vocab_size));
  KvCacheShape kv;
  kv.num_blocks = options.kv_blocks;
  kv.block_size = options.kv_block_size;
  kv.layers = c.block_count;
  kv.kv_dim = c.kv_dim();
  kv.type = options.kv_type;
  LLM_RETURN_IF_ERROR(b.AllocKvCache(kv));
  return m;
}

RopeParams LlamaModel::rope_params() const {
  const ModelConfig& c = config_;
  return RopeParams{c.head_dim, c.rope_dim, c.rope_freq_base, c.rope_freq_scale};
}

AttentionParams LlamaModel::attention_params() const {
  const ModelConfig& c = config_;
  return AttentionParams{c.head_count, c.head_count_kv, c.head_dim,
                         1.0f / std::sqrt(static_cast<float>(c.head_dim))};
}

absl::Status LlamaModel::Forward(const StepBatch& batch, std::span<const LogitsSpec> specs,
                                 std::vector<Logits>* out) {
  const int64_t n = static_cast<int64_t>(batch.tokens.size());
  const int64_t n_out = static_cast<int64_t>(batch.logit_rows.size());
  if (n < 1 || n > options_.max_step_tokens || n_out > options_.max_logit_rows ||
      specs.size() != batch.logit_rows.size() || batch.positions.size() != batch.tokens.size()) {
    return absl::InvalidArgumentError(StrCat("step of ", n, " tokens and ", n_out,
                                             " logit rows does not fit the model's scratch"));
  }
  const ModelConfig& c = config_;
  Backend& b = *backend_;
  LLM_RETURN_IF_ERROR(b.BeginStep(batch));

  const Tensor x = x_.Rows(n), xn = xn_.Rows(n), q = q_.Rows(n), k = k_.Rows(n), v = v_.Rows(n),
               attn = attn_.Rows(n), gate = gate_.Rows(n), up = up_.Rows(n), act = act_.Rows(n);
  const RopeParams rope = rope_params();
  const AttentionParams attention = attention_params();

  b.Embed(*token_embd_, x);
  b.RmsNorm(x, *layers_[0].attn_norm, c.rms_eps, xn);
  for (int64_t i = 0; i < c.block_count; ++i) {
    const Layer& l = layers_[i];
    // Attention block (xn: the normed input, from the op before).
    const MatMulTarget qkv[] = {{l.wq.get(), q}, {l.wk.get(), k}, {l.wv.get(), v}};
    b.MatMul(xn, qkv);
    b.Rope(q, k, rope);
    b.Attention(i, q, k, v, attention, attn);
    const MatMulTarget o[] = {{l.wo.get(), xn}};
    b.MatMul(attn, o);
    // Residual, then the feed-forward block (SwiGLU).
    b.AddRmsNorm(x, xn, *l.ffn_norm, c.rms_eps, xn);
    const MatMulTarget gate_up[] = {{l.w_gate.get(), gate}, {l.w_up.get(), up}};
    b.MatMul(xn, gate_up);
    b.SiluMul(gate, up, act);
    const MatMulTarget down[] = {{l.w_down.get(), xn}};
    b.MatMul(act, down);
    // Residual, and the next layer's attention norm.
    if (i + 1 < c.block_count) {
      b.AddRmsNorm(x, xn, *layers_[i + 1].attn_norm, c.rms_eps, xn);
    } else {
      b.Add(x, xn);
    }
  }
  if (n_out == 0) return b.ReadLogits(logits_.Rows(0), specs, out);
  const Tensor last = last_.Rows(n_out), logits = logits_.Rows(n_out);
  b.GatherLogitRows(x, last);
  b.RmsNorm(last, *output_norm_, c.rms_eps, last);
  const MatMulTarget head[] = {{output_.get(), logits}};
  b.MatMul(last, head);
  return b.ReadLogits(logits, specs, out);
}

}  // namespace llm::model
