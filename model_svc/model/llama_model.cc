#include "model_svc/model/llama_model.h"

#include <algorithm>
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
  // An absent optional tensor stays a null weight.
  auto upload = [&b](const WeightView& v) -> absl::StatusOr<std::unique_ptr<Weight>> {
    if (!v.present()) return std::unique_ptr<Weight>();
    return b.UploadWeight(v);
  };
  LLM_ASSIGN_OR_RETURN(m->token_embd_, upload(views.token_embd));
  LLM_ASSIGN_OR_RETURN(m->output_norm_, upload(views.output_norm));
  LLM_ASSIGN_OR_RETURN(m->output_, upload(views.output));
  if (m->config_.rope_long_short_factors) {
    const ModelConfig& c = m->config_;
    const int64_t context = options.context_length > 0 ? options.context_length : c.context_length;
    LLM_ASSIGN_OR_RETURN(
        m->rope_freqs_,
        upload(context > c.rope_orig_context ? views.rope_factors_long : views.rope_factors_short));
  } else {
    LLM_ASSIGN_OR_RETURN(m->rope_freqs_, upload(views.rope_freqs));
  }
  for (const LayerWeightViews& v : views.layers) {
    Layer l;
    LLM_ASSIGN_OR_RETURN(l.attn_norm, upload(v.attn_norm));
    LLM_ASSIGN_OR_RETURN(l.wq, upload(v.wq));
    LLM_ASSIGN_OR_RETURN(l.wk, upload(v.wk));
    LLM_ASSIGN_OR_RETURN(l.wv, upload(v.wv));
    LLM_ASSIGN_OR_RETURN(l.bq, upload(v.bq));
    LLM_ASSIGN_OR_RETURN(l.bk, upload(v.bk));
    LLM_ASSIGN_OR_RETURN(l.bv, upload(v.bv));
    LLM_ASSIGN_OR_RETURN(l.q_norm, upload(v.q_norm));
    LLM_ASSIGN_OR_RETURN(l.k_norm, upload(v.k_norm));
    LLM_ASSIGN_OR_RETURN(l.wo, upload(v.wo));
    LLM_ASSIGN_OR_RETURN(l.post_attn_norm, upload(v.post_attn_norm));
    LLM_ASSIGN_OR_RETURN(l.ffn_norm, upload(v.ffn_norm));
    LLM_ASSIGN_OR_RETURN(l.w_gate, upload(v.w_gate));
    LLM_ASSIGN_OR_RETURN(l.w_up, upload(v.w_up));
    LLM_ASSIGN_OR_RETURN(l.w_down, upload(v.w_down));
    LLM_ASSIGN_OR_RETURN(l.post_ffn_norm, upload(v.post_ffn_norm));
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
  LLM_ASSIGN_OR_RETURN(m->logits_, b.AllocTensor(options.max_logit_rows, c.vocab_size,
                                                 /*matmul_input=*/false));
  KvCacheShape kv;
  kv.num_blocks = options.kv_blocks;
  kv.block_size = options.kv_block_size;
  kv.layers = c.block_count;
  kv.kv_dim = c.kv_dim();
  kv.k_type = options.k_type();
  kv.v_type = options.v_type();
  LLM_RETURN_IF_ERROR(b.AllocKvCache(kv));
  return m;
}

RopeParams LlamaModel::rope_params(int64_t layer) const {
  const ModelConfig& c = config_;
  RopeParams p{c.head_dim, c.rope_dim, c.rope_freq_base, c.rope_freq_scale};
  p.neox = c.arch.rope_style == RopeStyle::kNeox;
  p.freq_factors = rope_freqs_.get();
  p.attn_factor = c.rope_attn_factor;
  if (c.rope_yarn) {
    p.ext_factor = 1.0f;
    p.corr_low = c.rope_yarn_corr_low;
    p.corr_high = c.rope_yarn_corr_high;
  }
  if (c.IsSlidingLayer(layer)) {
    p.freq_base = c.rope_freq_base_swa;
    p.freq_scale = 1.0f;  // llama.cpp: the sliding layers' scale is their training one
  }
  return p;
}

AttentionParams LlamaModel::attention_params(int64_t layer) const {
  const ModelConfig& c = config_;
  AttentionParams p{c.head_count, c.head_count_kv, c.head_dim, c.attention_scale};
  if (c.IsSlidingLayer(layer)) p.window = c.sliding_window;
  return p;
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
  // q and k as one row per head, for the per-head norms.
  const Tensor q_heads{q.data, n * c.head_count, c.head_dim};
  const Tensor k_heads{k.data, n * c.head_count_kv, c.head_dim};

  b.Embed(*token_embd_, x);
  if (c.arch.embedding_scale_sqrt_d) {
    b.Scale(x, std::sqrt(static_cast<float>(c.embedding_length)));
  }
  b.RmsNorm(x, *layers_[0].attn_norm, c.rms_eps, xn);
  for (int64_t i = 0; i < c.block_count; ++i) {
    const Layer& l = layers_[i];
    Observe("attn_norm", i, xn);
    // Attention block (xn: the normed input, from the op before).
    const MatMulTarget qkv[] = {
        {l.wq.get(), q, l.bq.get()}, {l.wk.get(), k, l.bk.get()}, {l.wv.get(), v, l.bv.get()}};
    b.MatMul(xn, qkv);
    if (l.q_norm != nullptr) {
      b.RmsNorm(q_heads, *l.q_norm, c.rms_eps, q_heads);
      b.RmsNorm(k_heads, *l.k_norm, c.rms_eps, k_heads);
    }
    b.Rope(q, k, rope_params(i));
    Observe("Qcur", i, q);
    Observe("Kcur", i, k);
    Observe("Vcur", i, v);
    b.Attention(i, q, k, v, attention_params(i), attn);
    Observe("kqv_out", i, attn);
    const MatMulTarget o[] = {{l.wo.get(), xn}};
    b.MatMul(attn, o);
    Observe("attn_out", i, xn);
    if (l.post_attn_norm != nullptr) {
      b.RmsNorm(xn, *l.post_attn_norm, c.rms_eps, xn);
      Observe("attn_post_norm", i, xn);
    }
    // Residual, then the feed-forward block (gated: SwiGLU or GeGLU).
    b.AddRmsNorm(x, xn, *l.ffn_norm, c.rms_eps, xn);
    Observe("ffn_inp", i, x);
    Observe("ffn_norm", i, xn);
    const MatMulTarget gate_up[] = {{l.w_gate.get(), gate}, {l.w_up.get(), up}};
    b.MatMul(xn, gate_up);
    Observe("ffn_gate", i, gate);
    Observe("ffn_up", i, up);
    if (c.arch.activation == FfnActivation::kGeluTanh) {
      b.GeluMul(gate, up, act);
    } else {
      b.SiluMul(gate, up, act);
    }
    Observe("ffn_act", i, act);
    const MatMulTarget down[] = {{l.w_down.get(), xn}};
    b.MatMul(act, down);
    Observe("ffn_out", i, xn);
    if (l.post_ffn_norm != nullptr) {
      b.RmsNorm(xn, *l.post_ffn_norm, c.rms_eps, xn);
      Observe("ffn_post_norm", i, xn);
    }
    // Residual, and the next layer's attention norm.
    if (i + 1 < c.block_count) {
      b.AddRmsNorm(x, xn, *layers_[i + 1].attn_norm, c.rms_eps, xn);
    } else {
      b.Add(x, xn);
    }
    Observe("l_out", i, x);
  }
  if (n_out == 0) return ReadLogits(logits_.Rows(0), specs, out);
  const Tensor last = last_.Rows(n_out), logits = logits_.Rows(n_out);
  b.GatherLogitRows(x, last);
  b.RmsNorm(last, *output_norm_, c.rms_eps, last);
  Observe("result_norm", -1, last);
  const MatMulTarget head[] = {{output_.get(), logits}};
  b.MatMul(last, head);
  return ReadLogits(logits, specs, out);
}

absl::Status LlamaModel::ReadLogits(const Tensor& logits, std::span<const LogitsSpec> specs,
                                    std::vector<Logits>* out) {
  Backend& b = *backend_;
  const auto masked = [](const LogitsSpec& s) { return s.mask != nullptr; };
  if (b.AppliesTokenMasks() || std::none_of(specs.begin(), specs.end(), masked)) {
    return b.ReadLogits(logits, specs, out);
  }
  // Masked rows come back as float32, to be masked and encoded here.
  read_specs_.assign(specs.begin(), specs.end());
  for (LogitsSpec& s : read_specs_) {
    if (masked(s)) s = LogitsSpec{.encoding = LogitsEncoding::kFloat32};
  }
  LLM_RETURN_IF_ERROR(b.ReadLogits(logits, read_specs_, out));
  for (size_t i = 0; i < specs.size(); ++i) {
    if (!masked(specs[i])) continue;
    Logits& row = (*out)[i];
    masked_row_.swap(row.values);
    EncodeLogitsInPlace(masked_row_, specs[i], &row);
  }
  return absl::OkStatus();
}

}  // namespace llm::model
