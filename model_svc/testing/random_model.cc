#include "model_svc/testing/random_model.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <random>
#include <utility>

#include "absl/status/status.h"
#include "common/gguf/gguf_writer.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "model_svc/backend/cpu/cpu_backend.h"
#include "model_svc/testing/reference_quant.h"

namespace llm::model::testing {
namespace {

using gguf::TensorType;
using gguf::testing::GgufBuilder;

// llama.cpp's general.file_type (enum llama_ftype) for a file whose matrices
// are mostly `type`.
uint32_t FileType(TensorType type) {
  switch (type) {
    case TensorType::kF32:
      return 0;
    case TensorType::kF16:
      return 1;
    case TensorType::kQ4_0:
      return 2;
    case TensorType::kQ4_1:
      return 3;
    case TensorType::kQ8_0:
      return 7;
    case TensorType::kQ5_0:
      return 8;
    case TensorType::kQ5_1:
      return 9;
    case TensorType::kQ4_K:
      return 15;  // Q4_K_M
    case TensorType::kQ6_K:
      return 18;
    case TensorType::kBF16:
      return 32;
    default:
      return 0;
  }
}

// Normal deviates from a generator whose sequence the standard fixes
// (mt19937_64) and Box-Muller, so a spec gives the same bytes everywhere.
class Normal {
 public:
  explicit Normal(uint64_t seed) : gen_(seed) {}
  float operator()() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    // Uniforms in (0, 1].
    const double u1 = (static_cast<double>(gen_() >> 11) + 1.0) * 0x1.0p-53;
    const double u2 = static_cast<double>(gen_() >> 11) * 0x1.0p-53;
    const double r = std::sqrt(-2.0 * std::log(u1));
    spare_ = static_cast<float>(r * std::sin(2 * std::numbers::pi * u2));
    has_spare_ = true;
    return static_cast<float>(r * std::cos(2 * std::numbers::pi * u2));
  }

 private:
  std::mt19937_64 gen_;
  bool has_spare_ = false;
  float spare_ = 0;
};

// SentencePiece's token types, as GGUF stores them.
constexpr int32_t kNormalToken = 1, kUnknownToken = 2, kControlToken = 3, kByteToken = 6;

// See RandomModelSpec::placeholder_vocab.
void WritePlaceholderVocab(int64_t vocab, GgufBuilder& b) {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types = {kUnknownToken, kControlToken, kControlToken};
  tokens.reserve(vocab);
  types.reserve(vocab);
  for (int byte = 0; byte < 256; ++byte) {
    constexpr char kHex[] = "0123456789ABCDEF";
    tokens.push_back(StrCat("<0x", std::string{kHex[byte >> 4], kHex[byte & 15]}, ">"));
    types.push_back(kByteToken);
  }
  for (int64_t id = static_cast<int64_t>(tokens.size()); id < vocab; ++id) {
    tokens.push_back(StrCat("t", id));
    types.push_back(kNormalToken);
  }
  b.AddString("tokenizer.ggml.model", "llama");
  b.AddStringArray("tokenizer.ggml.tokens", tokens);
  b.AddFloat32Array("tokenizer.ggml.scores", std::vector<float>(vocab, 0.0f));
  b.AddInt32Array("tokenizer.ggml.token_type", types);
}

class Writer {
 public:
  Writer(const RandomModelSpec& spec, GgufBuilder* b) : spec_(spec), b_(b), normal_(spec.seed) {}

  bool Omitted(const std::string& name) const {
    return std::find(spec_.omit.begin(), spec_.omit.end(), name) != spec_.omit.end();
  }

  void Uint32(const std::string& key, int64_t v) {
    if (!Omitted(key)) b_->AddUint32(key, static_cast<uint32_t>(v));
  }
  void Float32(const std::string& key, float v) {
    if (!Omitted(key)) b_->AddFloat32(key, v);
  }
  void String(const std::string& key, std::string_view v) {
    if (!Omitted(key)) b_->AddString(key, v);
  }

  // A [rows x cols] matrix (rows == 0: a [cols] vector) of random values.
  absl::Status Tensor(const std::string& name, TensorType type, int64_t rows, int64_t cols,
                      bool is_norm) {
    // Draw the values even when the tensor is replaced or left out, so the
    // other tensors keep their values.
    std::vector<float> values(std::max<int64_t>(rows, 1) * cols);
    const float scale = 1.0f / std::sqrt(static_cast<float>(cols));
    for (float& v : values) v = is_norm ? 1.0f + 0.1f * normal_() : scale * normal_();
    if (Omitted(name)) return absl::OkStatus();
    for (const TensorOverride& o : spec_.overrides) {
      if (o.name == name) return absl::OkStatus();  // written by WriteOverrides
    }
    std::vector<int64_t> ne =
        rows == 0 ? std::vector<int64_t>{cols} : std::vector<int64_t>{cols, rows};
    LLM_ASSIGN_OR_RETURN(std::string bytes, QuantizeMatrix(type, values, cols));
    b_->AddTensor(name, type, std::move(ne), bytes);
    return absl::OkStatus();
  }

  void WriteOverrides() {
    for (const TensorOverride& o : spec_.overrides) {
      if (o.fill.has_value() && o.type == TensorType::kF32) {
        int64_t n = 1;
        for (int64_t d : o.ne) n *= d;
        b_->AddTensorF32(o.name, o.ne, std::vector<float>(n, *o.fill));
      } else {
        b_->AddTensor(o.name, o.type, o.ne);
      }
    }
  }

 private:
  const RandomModelSpec& spec_;
  GgufBuilder* b_;
  Normal normal_;
};

}  // namespace

RandomModelSpec ArchitectureSpec(const std::string& architecture) {
  RandomModelSpec spec;
  spec.architecture = architecture;
  spec.name = StrCat("random-", architecture);
  if (architecture == "llama") {
    spec.rope_freqs = true;
  } else if (architecture == "qwen2") {
    spec.qkv_bias = true;
  } else if (architecture == "qwen3") {
    spec.qk_norm = true;
  } else if (architecture == "gemma3") {
    spec.qk_norm = true;
    spec.post_norms = true;
    spec.head_dim = 64;
    spec.sliding_window = 8;
    spec.tied = true;
    spec.rms_eps = 1e-6f;
    spec.rope_base = 1000000.0f;
  } else if (architecture == "phi3") {
    spec.fused_qkv = true;
    spec.fused_gate_up = true;
  }
  return spec;
}

RandomModelSpec SmolLm2Shapes() {
  RandomModelSpec spec;
  spec.name = "random-smollm2-135m";
  spec.vocab = 49152;
  spec.d_model = 576;
  spec.layers = 30;
  spec.heads = 9;
  spec.kv_heads = 3;
  spec.ff = 1536;
  spec.context = 8192;
  spec.rope_base = 100000.0f;
  spec.matrix_type = TensorType::kQ4_1;
  spec.embd_type = TensorType::kQ8_0;
  spec.tied = true;
  return spec;
}

RandomModelSpec Llama3_2_1bShapes() {
  RandomModelSpec spec;
  spec.name = "random-llama3.2-1b";
  spec.vocab = 128256;
  spec.d_model = 2048;
  spec.layers = 16;
  spec.heads = 32;
  spec.kv_heads = 8;
  spec.ff = 8192;
  spec.context = 131072;
  spec.rope_base = 500000.0f;
  spec.rope_freqs = true;
  spec.matrix_type = TensorType::kQ4_K;
  spec.embd_type = TensorType::kQ6_K;
  spec.tied = true;
  return spec;
}

RandomModelSpec Llama3_8bShapes() {
  RandomModelSpec spec;
  spec.name = "random-llama3-8b";
  spec.vocab = 128256;
  spec.d_model = 4096;
  spec.layers = 32;
  spec.heads = 32;
  spec.kv_heads = 8;
  spec.ff = 14336;
  spec.context = 8192;
  spec.rope_base = 500000.0f;
  spec.matrix_type = TensorType::kBF16;
  spec.embd_type = TensorType::kBF16;
  return spec;
}

absl::StatusOr<std::string> RandomModelGguf(const RandomModelSpec& spec) {
  if (spec.vocab < 1 || spec.d_model < 1 || spec.layers < 0 || spec.heads < 1 ||
      spec.kv_heads < 1 || spec.ff < 1) {
    return absl::InvalidArgumentError("random model: sizes must be positive");
  }
  GgufBuilder b;
  Writer w(spec, &b);
  const std::string p = spec.architecture + ".";
  const int64_t head_dim = spec.head_dim_or_default();
  w.String("general.architecture", spec.architecture);
  w.String("general.name", spec.name);
  w.Uint32(p + "vocab_size", spec.vocab);
  w.Uint32(p + "context_length", spec.context);
  w.Uint32(p + "embedding_length", spec.d_model);
  w.Uint32(p + "block_count", spec.layers);
  w.Uint32(p + "feed_forward_length", spec.ff);
  w.Uint32(p + "rope.dimension_count", spec.rope_dim > 0 ? spec.rope_dim : head_dim);
  w.Uint32(p + "attention.head_count", spec.heads);
  w.Uint32(p + "attention.head_count_kv", spec.kv_heads);
  if (spec.head_dim > 0) {
    w.Uint32(p + "attention.key_length", spec.head_dim);
    w.Uint32(p + "attention.value_length", spec.head_dim);
  }
  w.Float32(p + "rope.freq_base", spec.rope_base);
  w.Float32(p + "attention.layer_norm_rms_epsilon", spec.rms_eps);
  if (!spec.rope_scaling_type.empty()) {
    w.String(p + "rope.scaling.type", spec.rope_scaling_type);
    w.Float32(p + "rope.scaling.factor", spec.rope_scaling_factor);
  }
  if (spec.sliding_window > 0) w.Uint32(p + "attention.sliding_window", spec.sliding_window);
  if (spec.long_short_factors) {
    w.Uint32(p + "rope.scaling.original_context_length", spec.rope_orig_context);
    w.Float32(p + "rope.scaling.attn_factor", spec.rope_attn_factor);
  } else if (spec.rope_scaling_type == "yarn") {
    w.Uint32(p + "rope.scaling.original_context_length", spec.rope_orig_context);
  }
  w.Uint32("general.file_type", FileType(spec.matrix_type));
  if (spec.placeholder_vocab) {
    if (spec.vocab < 259) {
      return absl::InvalidArgumentError(StrCat(
          "random model: a placeholder vocabulary needs at least 259 tokens, not ", spec.vocab));
    }
    WritePlaceholderVocab(spec.vocab, b);
  } else if (spec.no_vocab_key) {
    w.String("tokenizer.ggml.model", "none");
  }
  w.Uint32("general.quantization_version", 2);

  if (spec.config_only) {
    if (!w.Omitted("token_embd.weight")) {
      b.AddTensor("token_embd.weight", spec.embd_type, {spec.d_model, spec.vocab});
    }
    w.WriteOverrides();
    return b.Serialize();
  }

  const int64_t d = spec.d_model, q_dim = spec.heads * head_dim, kv_dim = spec.kv_heads * head_dim;
  const TensorType m = spec.matrix_type;
  LLM_RETURN_IF_ERROR(w.Tensor("token_embd.weight", spec.embd_type, spec.vocab, d, false));
  if (spec.rope_freqs) {
    // Llama 3.1's shape of factors: 1 for the fast pairs, up to 8 for the
    // slow ones.
    const int64_t pairs = (spec.rope_dim > 0 ? spec.rope_dim : head_dim) / 2;
    std::vector<float> factors(pairs);
    for (int64_t i = 0; i < pairs; ++i)
      factors[i] = 1.0f + 7.0f * i / std::max<int64_t>(1, pairs - 1);
    if (!w.Omitted("rope_freqs.weight")) b.AddTensorF32("rope_freqs.weight", {pairs}, factors);
  }
  if (spec.long_short_factors) {
    const int64_t pairs = (spec.rope_dim > 0 ? spec.rope_dim : head_dim) / 2;
    std::vector<float> long_factors(pairs), short_factors(pairs);
    for (int64_t i = 0; i < pairs; ++i) {
      const float t = static_cast<float>(i) / std::max<int64_t>(1, pairs - 1);
      long_factors[i] = 1.0f + 7.0f * t;
      short_factors[i] = 1.0f + t;
    }
    b.AddTensorF32("rope_factors_long.weight", {pairs}, long_factors);
    b.AddTensorF32("rope_factors_short.weight", {pairs}, short_factors);
  }
  for (int64_t i = 0; i < spec.layers; ++i) {
    const std::string blk = StrCat("blk.", i, ".");
    const TensorType f32 = TensorType::kF32;
    LLM_RETURN_IF_ERROR(w.Tensor(blk + "attn_norm.weight", f32, 0, d, true));
    if (spec.fused_qkv) {
      LLM_RETURN_IF_ERROR(w.Tensor(blk + "attn_qkv.weight", m, q_dim + 2 * kv_dim, d, false));
      if (spec.qkv_bias) {
        LLM_RETURN_IF_ERROR(w.Tensor(blk + "attn_qkv.bias", f32, 0, q_dim + 2 * kv_dim, true));
      }
    } else {
      LLM_RETURN_IF_ERROR(w.Tensor(blk + "attn_q.weight", m, q_dim, d, false));
      LLM_RETURN_IF_ERROR(w.Tensor(blk + "attn_k.weight", m, kv_dim, d, false));
      LLM_RETURN_IF_ERROR(w.Tensor(blk + "attn_v.weight", m, kv_dim, d, false));
      if (spec.qkv_bias) {
        LLM_RETURN_IF_ERROR(w.Tensor(blk + "attn_q.bias", f32, 0, q_dim, true));
        LLM_RETURN_IF_ERROR(w.Tensor(blk + "attn_k.bias", f32, 0, kv_dim, true));
        LLM_RETURN_IF_ERROR(w.Tensor(blk + "attn_v.bias", f32, 0, kv_dim, true));
      }
    }
    if (spec.qk_norm) {
      LLM_RETURN_IF_ERROR(w.Tensor(blk + "attn_q_norm.weight", f32, 0, head_dim, true));
      LLM_RETURN_IF_ERROR(w.Tensor(blk + "attn_k_norm.weight", f32, 0, head_dim, true));
    }
    LLM_RETURN_IF_ERROR(w.Tensor(blk + "attn_output.weight", m, d, q_dim, false));
    if (spec.post_norms) {
      LLM_RETURN_IF_ERROR(w.Tensor(blk + "post_attention_norm.weight", f32, 0, d, true));
    }
    LLM_RETURN_IF_ERROR(w.Tensor(blk + "ffn_norm.weight", f32, 0, d, true));
    if (spec.fused_gate_up) {
      LLM_RETURN_IF_ERROR(w.Tensor(blk + "ffn_up.weight", m, 2 * spec.ff, d, false));
    } else {
      LLM_RETURN_IF_ERROR(w.Tensor(blk + "ffn_gate.weight", m, spec.ff, d, false));
      LLM_RETURN_IF_ERROR(w.Tensor(blk + "ffn_up.weight", m, spec.ff, d, false));
    }
    LLM_RETURN_IF_ERROR(w.Tensor(blk + "ffn_down.weight", m, d, spec.ff, false));
    if (spec.post_norms) {
      LLM_RETURN_IF_ERROR(w.Tensor(blk + "post_ffw_norm.weight", f32, 0, d, true));
    }
  }
  LLM_RETURN_IF_ERROR(w.Tensor("output_norm.weight", TensorType::kF32, 0, d, true));
  if (!spec.tied) {
    LLM_RETURN_IF_ERROR(
        w.Tensor("output.weight", spec.output_type.value_or(m), spec.vocab, d, false));
  }
  w.WriteOverrides();
  return b.Serialize();
}

absl::StatusOr<std::shared_ptr<const gguf::File>> RandomModelFile(const RandomModelSpec& spec) {
  LLM_ASSIGN_OR_RETURN(std::string bytes, RandomModelGguf(spec));
  LLM_ASSIGN_OR_RETURN(std::unique_ptr<gguf::File> file,
                       gguf::File::FromBytes(std::move(bytes), "random.gguf"));
  return std::shared_ptr<const gguf::File>(std::move(file));
}

absl::StatusOr<std::unique_ptr<LlamaModel>> LoadRandomModel(const RandomModelSpec& spec,
                                                            const ModelOptions& options,
                                                            int threads) {
  LLM_ASSIGN_OR_RETURN(std::shared_ptr<const gguf::File> file, RandomModelFile(spec));
  return LlamaModel::Load(std::move(file), cpu::CreateCpuBackend({.threads = threads}), options);
}

}  // namespace llm::model::testing
