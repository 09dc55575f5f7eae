#include "model_svc/model/weights.h"

#include <cstdint>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "model_svc/formats/weight_formats.h"

namespace llm::model {
namespace {

std::string TypeName(uint32_t type) {
  const gguf::TensorTypeTraits* traits = gguf::FindTensorTypeTraits(type);
  return traits != nullptr ? std::string(traits->name) : StrCat("type ", type);
}

// Locates `name` and checks it is a [cols] vector (rows == 1) or a
// [cols x rows] matrix in a supported type.
absl::StatusOr<WeightView> Locate(const gguf::File& file, const std::string& name, int64_t rows,
                                  int64_t cols, bool is_vector) {
  const gguf::TensorInfo* t = file.FindTensor(name);
  if (t == nullptr) {
    return absl::InvalidArgumentError(StrCat(file.name(), ": missing tensor ", name));
  }
  const bool shape_ok = is_vector ? (t->n_dims == 1 && t->ne[0] == cols)
                                  : (t->n_dims == 2 && t->ne[0] == cols && t->ne[1] == rows);
  if (!shape_ok) {
    std::string expected = is_vector ? StrCat("[", cols, "]") : StrCat("[", cols, ", ", rows, "]");
    std::string actual = StrCat("[", t->ne[0]);
    for (uint32_t d = 1; d < t->n_dims; ++d) StrAppend(&actual, ", ", t->ne[d]);
    actual += "]";
    return absl::InvalidArgumentError(
        StrCat(file.name(), ": tensor ", name, " has shape ", actual, ", expected ", expected));
  }
  if (reinterpret_cast<uintptr_t>(t->data) % 4 != 0) {
    return absl::InvalidArgumentError(
        StrCat(file.name(), ": tensor ", name, " is not 4-byte aligned in the file"));
  }
  const auto type = static_cast<gguf::TensorType>(t->ggml_type);
  if (is_vector) {
    if (type != gguf::TensorType::kF32) {
      return absl::UnimplementedError(StrCat(file.name(), ": tensor ", name, " has type ",
                                             TypeName(t->ggml_type), "; norm weights must be F32"));
    }
  } else if (!formats::IsSupportedWeightType(type)) {
    return absl::UnimplementedError(
        StrCat(file.name(), ": tensor ", name, " has type ", TypeName(t->ggml_type),
               ", which is not supported (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, "
               "Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS)"));
  } else if (absl::Status s = formats::CheckWeightShape(type, cols); !s.ok()) {
    return absl::InvalidArgumentError(StrCat(file.name(), ": tensor ", name, ": ", s.message()));
  }
  WeightView w;
  w.name = t->name;
  w.type = type;
  w.rows = is_vector ? 1 : rows;
  w.cols = cols;
  w.data = t->data;
  w.row_bytes = is_vector ? cols * sizeof(float) : formats::RowBytes(type, cols);
  return w;
}

// Locates tensors by name and remembers which it used, so that the ones left
// over can be named.
class Locator {
 public:
  explicit Locator(const gguf::File& file) : file_(file) {}

  absl::StatusOr<WeightView> Matrix(const std::string& name, int64_t rows, int64_t cols) {
    used_.insert(name);
    return Locate(file_, name, rows, cols, false);
  }
  absl::StatusOr<WeightView> Vector(const std::string& name, int64_t n) {
    used_.insert(name);
    return Locate(file_, name, 1, n, true);
  }
  // An absent tensor gives an absent view.
  absl::StatusOr<WeightView> OptionalVector(const std::string& name, int64_t n) {
    if (!Has(name)) return WeightView{};
    return Vector(name, n);
  }
  bool Has(const std::string& name) const { return file_.FindTensor(name) != nullptr; }

  // Error naming the first tensor of the file nothing located.
  absl::Status CheckAllUsed(std::string_view architecture) const {
    for (const gguf::TensorInfo& t : file_.tensors()) {
      if (!used_.contains(std::string(t.name))) {
        return absl::InvalidArgumentError(StrCat(file_.name(), ": tensor ", t.name,
                                                 " is not used by the ", architecture,
                                                 " architecture (the model would ignore it)"));
      }
    }
    return absl::OkStatus();
  }

 private:
  const gguf::File& file_;
  absl::flat_hash_set<std::string> used_;
};

// Q, K and V of layer prefix `p`: separate tensors, or row ranges of a fused
// attn_qkv; their optional biases likewise.
absl::Status LocateQkv(Locator& at, const ModelConfig& c, const std::string& p,
                       LayerWeightViews& l) {
  const int64_t d = c.embedding_length, q = c.q_dim(), kv = c.kv_dim();
  const bool bias_allowed = c.arch.qkv_bias_allowed;
  if (at.Has(p + "attn_qkv.weight")) {
    LLM_ASSIGN_OR_RETURN(WeightView qkv, at.Matrix(p + "attn_qkv.weight", q + 2 * kv, d));
    l.wq = qkv.RowRange(0, q);
    l.wk = qkv.RowRange(q, kv);
    l.wv = qkv.RowRange(q + kv, kv);
    if (bias_allowed && at.Has(p + "attn_qkv.bias")) {
      LLM_ASSIGN_OR_RETURN(WeightView b, at.Vector(p + "attn_qkv.bias", q + 2 * kv));
      l.bq = b.VectorSlice(0, q);
      l.bk = b.VectorSlice(q, kv);
      l.bv = b.VectorSlice(q + kv, kv);
      return absl::OkStatus();
    }
  } else {
    LLM_ASSIGN_OR_RETURN(l.wq, at.Matrix(p + "attn_q.weight", q, d));
    LLM_ASSIGN_OR_RETURN(l.wk, at.Matrix(p + "attn_k.weight", kv, d));
    LLM_ASSIGN_OR_RETURN(l.wv, at.Matrix(p + "attn_v.weight", kv, d));
  }
  if (bias_allowed) {
    LLM_ASSIGN_OR_RETURN(l.bq, at.OptionalVector(p + "attn_q.bias", q));
    LLM_ASSIGN_OR_RETURN(l.bk, at.OptionalVector(p + "attn_k.bias", kv));
    LLM_ASSIGN_OR_RETURN(l.bv, at.OptionalVector(p + "attn_v.bias", kv));
    if (l.bq.present() != l.bk.present() || l.bq.present() != l.bv.present()) {
      return absl::InvalidArgumentError(
          StrCat("layer ", p, " has some of the Q, K and V biases but not all"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ModelWeightViews> LocateWeights(const gguf::File& file, const ModelConfig& c) {
  // At least six tensors per layer (fused QKV and gate/up): a block count
  // the tensors cannot back is an error before anything is sized by it.
  constexpr int64_t kMinLayerTensors = 6;
  if (c.block_count > static_cast<int64_t>(file.tensors().size()) / kMinLayerTensors) {
    return absl::InvalidArgumentError(StrCat(file.name(), ": block_count ", c.block_count,
                                             " needs at least ", c.block_count * kMinLayerTensors,
                                             " layer tensors; the file has ", file.tensors().size(),
                                             " tensors"));
  }
  Locator at(file);
  ModelWeightViews w;
  const int64_t d = c.embedding_length, ff = c.feed_forward_length;
  LLM_ASSIGN_OR_RETURN(w.token_embd, at.Matrix("token_embd.weight", c.vocab_size, d));
  LLM_ASSIGN_OR_RETURN(w.output_norm, at.Vector("output_norm.weight", d));
  if (c.tied_embeddings) {
    w.output = w.token_embd;
  } else {
    LLM_ASSIGN_OR_RETURN(w.output, at.Matrix("output.weight", c.vocab_size, d));
  }
  if (c.rope_freq_factors) {
    LLM_ASSIGN_OR_RETURN(w.rope_freqs, at.Vector("rope_freqs.weight", c.rope_dim / 2));
  }
  if (c.rope_long_short_factors) {
    LLM_ASSIGN_OR_RETURN(w.rope_factors_long,
                         at.Vector("rope_factors_long.weight", c.rope_dim / 2));
    LLM_ASSIGN_OR_RETURN(w.rope_factors_short,
                         at.Vector("rope_factors_short.weight", c.rope_dim / 2));
  }
  w.layers.resize(c.block_count);
  for (int64_t i = 0; i < c.block_count; ++i) {
    const std::string p = StrCat("blk.", i, ".");
    LayerWeightViews& l = w.layers[i];
    LLM_ASSIGN_OR_RETURN(l.attn_norm, at.Vector(p + "attn_norm.weight", d));
    LLM_RETURN_IF_ERROR(LocateQkv(at, c, p, l));
    if (c.arch.qk_norm) {
      LLM_ASSIGN_OR_RETURN(l.q_norm, at.Vector(p + "attn_q_norm.weight", c.head_dim));
      LLM_ASSIGN_OR_RETURN(l.k_norm, at.Vector(p + "attn_k_norm.weight", c.head_dim));
    }
    LLM_ASSIGN_OR_RETURN(l.wo, at.Matrix(p + "attn_output.weight", d, c.q_dim()));
    LLM_ASSIGN_OR_RETURN(l.ffn_norm, at.Vector(p + "ffn_norm.weight", d));
    if (c.arch.fused_gate_up) {
      LLM_ASSIGN_OR_RETURN(WeightView gate_up, at.Matrix(p + "ffn_up.weight", 2 * ff, d));
      l.w_gate = gate_up.RowRange(0, ff);
      l.w_up = gate_up.RowRange(ff, ff);
    } else {
      LLM_ASSIGN_OR_RETURN(l.w_gate, at.Matrix(p + "ffn_gate.weight", ff, d));
      LLM_ASSIGN_OR_RETURN(l.w_up, at.Matrix(p + "ffn_up.weight", ff, d));
    }
    LLM_ASSIGN_OR_RETURN(l.w_down, at.Matrix(p + "ffn_down.weight", d, ff));
    if (c.arch.post_norms) {
      LLM_ASSIGN_OR_RETURN(l.post_attn_norm, at.Vector(p + "post_attention_norm.weight", d));
      LLM_ASSIGN_OR_RETURN(l.post_ffn_norm, at.Vector(p + "post_ffw_norm.weight", d));
    }
  }
  LLM_RETURN_IF_ERROR(at.CheckAllUsed(c.architecture));
  return w;
}

}  // namespace llm::model
