#include "model_svc/model/weights.h"

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "model_svc/backend/cpu/quant.h"

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
  } else if (!cpu::IsSupportedWeightType(type)) {
    return absl::UnimplementedError(
        StrCat(file.name(), ": tensor ", name, " has type ", TypeName(t->ggml_type),
               ", which is not supported (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, "
               "Q6_K)"));
  } else if (absl::Status s = cpu::CheckWeightShape(type, cols); !s.ok()) {
    return absl::InvalidArgumentError(StrCat(file.name(), ": tensor ", name, ": ", s.message()));
  }
  WeightView w;
  w.name = t->name;
  w.type = type;
  w.rows = is_vector ? 1 : rows;
  w.cols = cols;
  w.data = t->data;
  w.row_bytes = is_vector ? cols * sizeof(float) : cpu::RowBytes(type, cols);
  return w;
}

}  // namespace

absl::StatusOr<ModelWeightViews> LocateWeights(const gguf::File& file, const ModelConfig& c) {
  // Nine tensors per layer: a block count the tensors cannot back is an error
  // before anything is sized by it.
  if (c.block_count > static_cast<int64_t>(file.tensors().size()) / 9) {
    return absl::InvalidArgumentError(
        StrCat(file.name(), ": block_count ", c.block_count, " needs ", c.block_count * 9,
               " layer tensors; the file has ", file.tensors().size(), " tensors"));
  }
  ModelWeightViews w;
  const int64_t d = c.embedding_length;
  LLM_ASSIGN_OR_RETURN(w.token_embd, Locate(file, "token_embd.weight", c.vocab_size, d, false));
  LLM_ASSIGN_OR_RETURN(w.output_norm, Locate(file, "output_norm.weight", 1, d, true));
  if (c.tied_embeddings) {
    w.output = w.token_embd;
  } else {
    LLM_ASSIGN_OR_RETURN(w.output, Locate(file, "output.weight", c.vocab_size, d, false));
  }
  w.layers.resize(c.block_count);
  for (int64_t i = 0; i < c.block_count; ++i) {
    const std::string p = StrCat("blk.", i, ".");
    LayerWeightViews& l = w.layers[i];
    LLM_ASSIGN_OR_RETURN(l.attn_norm, Locate(file, p + "attn_norm.weight", 1, d, true));
    LLM_ASSIGN_OR_RETURN(l.wq, Locate(file, p + "attn_q.weight", c.q_dim(), d, false));
    LLM_ASSIGN_OR_RETURN(l.wk, Locate(file, p + "attn_k.weight", c.kv_dim(), d, false));
    LLM_ASSIGN_OR_RETURN(l.wv, Locate(file, p + "attn_v.weight", c.kv_dim(), d, false));
    LLM_ASSIGN_OR_RETURN(l.wo, Locate(file, p + "attn_output.weight", d, c.q_dim(), false));
    LLM_ASSIGN_OR_RETURN(l.ffn_norm, Locate(file, p + "ffn_norm.weight", 1, d, true));
    LLM_ASSIGN_OR_RETURN(l.w_gate,
                         Locate(file, p + "ffn_gate.weight", c.feed_forward_length, d, false));
    LLM_ASSIGN_OR_RETURN(l.w_up,
                         Locate(file, p + "ffn_up.weight", c.feed_forward_length, d, false));
    LLM_ASSIGN_OR_RETURN(l.w_down,
                         Locate(file, p + "ffn_down.weight", d, c.feed_forward_length, false));
  }
  return w;
}

}  // namespace llm::model
