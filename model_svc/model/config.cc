#include "model_svc/model/config.h"

#include <cmath>
#include <string>

#include "absl/status/status.h"
#include "common/status_macros.h"
#include "common/strings.h"

namespace llm::model {
namespace {

absl::Status Invalid(const gguf::File& file, std::string_view what) {
  return absl::InvalidArgumentError(StrCat(file.name(), ": ", what));
}

// Reads an optional positive integer key; `fallback` when absent.
absl::StatusOr<int64_t> OptionalCount(const gguf::File& file, const std::string& key,
                                      int64_t fallback) {
  if (file.Find(key) == nullptr) return fallback;
  LLM_ASSIGN_OR_RETURN(uint64_t v, file.GetUint(key));
  if (v == 0 || v > (uint64_t{1} << 31)) {
    return Invalid(file, StrCat(key, " = ", v, " is out of range"));
  }
  return static_cast<int64_t>(v);
}

absl::StatusOr<int64_t> RequiredCount(const gguf::File& file, const std::string& key) {
  if (file.Find(key) == nullptr) return Invalid(file, StrCat("missing metadata key ", key));
  return OptionalCount(file, key, 0);
}

absl::StatusOr<float> OptionalFloat(const gguf::File& file, const std::string& key,
                                    float fallback) {
  if (file.Find(key) == nullptr) return fallback;
  LLM_ASSIGN_OR_RETURN(double v, file.GetFloat(key));
  if (!(v > 0) || v > 1e12) return Invalid(file, StrCat(key, " = ", v, " is out of range"));
  return static_cast<float>(v);
}

}  // namespace

absl::StatusOr<ModelConfig> ModelConfig::FromGguf(const gguf::File& file) {
  ModelConfig c;
  LLM_ASSIGN_OR_RETURN(std::string_view arch, file.GetString("general.architecture"));
  c.architecture = std::string(arch);
  const Architecture* family = FindArchitecture(arch);
  if (family == nullptr) {
    return absl::UnimplementedError(
        StrCat(file.name(), ": architecture \"", arch,
               "\" is not supported (supported: ", SupportedArchitectures(), ")"));
  }
  c.arch = *family;
  if (const gguf::Value* v = file.Find("general.name"); v != nullptr) {
    if (auto s = v->AsString(); s.ok()) c.name = std::string(*s);
  }
  const std::string p = c.architecture + ".";
  LLM_ASSIGN_OR_RETURN(c.context_length, RequiredCount(file, p + "context_length"));
  LLM_ASSIGN_OR_RETURN(c.embedding_length, RequiredCount(file, p + "embedding_length"));
  LLM_ASSIGN_OR_RETURN(c.block_count, RequiredCount(file, p + "block_count"));
  LLM_ASSIGN_OR_RETURN(c.feed_forward_length, RequiredCount(file, p + "feed_forward_length"));
  LLM_ASSIGN_OR_RETURN(c.head_count, RequiredCount(file, p + "attention.head_count"));
  LLM_ASSIGN_OR_RETURN(c.head_count_kv,
                       OptionalCount(file, p + "attention.head_count_kv", c.head_count));
  if (c.embedding_length % c.head_count != 0) {
    return Invalid(file, StrCat("embedding_length ", c.embedding_length,
                                " is not a multiple of head_count ", c.head_count));
  }
  LLM_ASSIGN_OR_RETURN(c.head_dim, OptionalCount(file, p + "attention.key_length",
                                                 c.embedding_length / c.head_count));
  LLM_ASSIGN_OR_RETURN(int64_t value_length,
                       OptionalCount(file, p + "attention.value_length", c.head_dim));
  if (value_length != c.head_dim) {
    return Invalid(file, "attention.key_length and value_length differ");
  }
  if (c.head_count % c.head_count_kv != 0) {
    return Invalid(file, StrCat("head_count ", c.head_count, " is not a multiple of head_count_kv ",
                                c.head_count_kv));
  }
  if (c.head_dim % 2 != 0 || c.head_dim > 1024) {
    return Invalid(file, StrCat("head dimension ", c.head_dim, " is not supported"));
  }
  LLM_ASSIGN_OR_RETURN(c.rope_dim, OptionalCount(file, p + "rope.dimension_count", c.head_dim));
  if (c.rope_dim > c.head_dim || c.rope_dim % 2 != 0) {
    return Invalid(file, StrCat("rope.dimension_count ", c.rope_dim,
                                " does not fit head dimension ", c.head_dim));
  }
  LLM_ASSIGN_OR_RETURN(c.rope_freq_base, OptionalFloat(file, p + "rope.freq_base", 10000.0f));
  LLM_ASSIGN_OR_RETURN(c.rms_eps,
                       OptionalFloat(file, p + "attention.layer_norm_rms_epsilon", 1e-5f));
  // As llama.cpp reads them: the type defaults to linear, the factor to
  // rope.scale_linear (older files) and then to 1; "none" never scales.
  std::string_view type = "linear";
  if (const gguf::Value* v = file.Find(p + "rope.scaling.type"); v != nullptr) {
    LLM_ASSIGN_OR_RETURN(type, v->AsString());
  }
  if (type == "linear" || type == "yarn") {
    const std::string factor_key = file.Find(p + "rope.scaling.factor") != nullptr
                                       ? p + "rope.scaling.factor"
                                       : p + "rope.scale_linear";
    LLM_ASSIGN_OR_RETURN(float factor, OptionalFloat(file, factor_key, 1.0f));
    c.rope_freq_scale = 1.0f / factor;
    c.rope_yarn = type == "yarn";
  } else if (type != "none") {
    return absl::UnimplementedError(
        StrCat(file.name(), ": rope scaling \"", type, "\" is not supported (linear, yarn, none)"));
  }
  if (const gguf::Value* v = file.Find(p + "rope.scaling.yarn_log_multiplier"); v != nullptr) {
    if (auto mul = v->AsFloat(); !mul.ok() || *mul != 0) {
      return absl::UnimplementedError(
          StrCat(file.name(), ": ", p, "rope.scaling.yarn_log_multiplier is not supported"));
    }
  }
  if (file.FindTensor("rope_freqs.weight") != nullptr) {
    if (!c.arch.rope_freqs_allowed) {
      return absl::UnimplementedError(StrCat(file.name(),
                                             ": per-frequency RoPE factors "
                                             "(rope_freqs.weight) are not supported for ",
                                             arch));
    }
    c.rope_freq_factors = true;
  }
  const bool has_long = file.FindTensor("rope_factors_long.weight") != nullptr;
  const bool has_short = file.FindTensor("rope_factors_short.weight") != nullptr;
  if (has_long || has_short) {
    if (!c.arch.long_short_factors_allowed) {
      return absl::UnimplementedError(StrCat(file.name(),
                                             ": long/short RoPE factors "
                                             "(rope_factors_long/short.weight) are not supported "
                                             "for ",
                                             arch));
    }
    if (has_long != has_short) {
      return Invalid(file, "rope_factors_long.weight and rope_factors_short.weight come together");
    }
    c.rope_long_short_factors = true;
  }
  LLM_ASSIGN_OR_RETURN(
      c.rope_orig_context,
      OptionalCount(file, p + "rope.scaling.original_context_length", c.context_length));
  LLM_ASSIGN_OR_RETURN(c.rope_attn_factor,
                       OptionalFloat(file, p + "rope.scaling.attn_factor", 1.0f));
  if (c.rope_yarn) {
    // llama.cpp's YaRN (llama-context.cpp and ggml's rope_yarn), in its
    // float operations: the magnitude correction it applies (mscale) is
    // divided out again here, so the net scale is the file's attn_factor
    // times rope_yarn's 1 + 0.1 ln(1 / freq_scale); the correction dims come
    // from beta_fast 32 and beta_slow 1 over the original context.
    const float factor = 1.0f / c.rope_freq_scale;
    float attn = factor <= 1.0f ? 1.0f : 0.1f * 1.0f * std::log(factor) + 1.0f;
    attn *= 1.0f / (1.0f + 0.1f * std::log(factor));
    c.rope_attn_factor *= attn;
    auto corr_dim = [&](float n_rot) {
      return static_cast<float>(c.rope_dim) *
             std::log(static_cast<float>(c.rope_orig_context) /
                      (n_rot * 2 * static_cast<float>(M_PI))) /
             (2 * std::log(c.rope_freq_base));
    };
    c.rope_yarn_corr_low = std::max(0.0f, std::floor(corr_dim(32.0f)));
    c.rope_yarn_corr_high = std::min(static_cast<float>(c.rope_dim - 1), std::ceil(corr_dim(1.0f)));
  }
  c.attention_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  if (c.arch.swa_pattern > 0) {
    LLM_ASSIGN_OR_RETURN(c.sliding_window, OptionalCount(file, p + "attention.sliding_window", 0));
    LLM_ASSIGN_OR_RETURN(c.rope_freq_base_swa,
                         OptionalFloat(file, p + "rope.freq_base_swa", c.arch.swa_rope_base));
    // A pattern n makes every nth layer global; llama.cpp also reads a
    // per-layer array here, which no file of these families uses yet.
    if (const gguf::Value* v = file.Find(p + "attention.sliding_window_pattern"); v != nullptr) {
      auto n = v->AsUint();
      if (!n.ok() || *n == 0 || *n > 1024) {
        return absl::UnimplementedError(StrCat(file.name(), ": ", p,
                                               "attention.sliding_window_pattern is supported as "
                                               "a count of layers (1 to 1024) only"));
      }
      c.arch.swa_pattern = static_cast<int>(*n);
    }
  }
  if (const gguf::Value* v = file.Find(p + "final_logit_softcapping"); v != nullptr) {
    if (auto cap = v->AsFloat(); !cap.ok() || *cap != 0) {
      return absl::UnimplementedError(
          StrCat(file.name(), ": ", p, "final_logit_softcapping is not supported"));
    }
  }

  const gguf::TensorInfo* embd = file.FindTensor("token_embd.weight");
  if (embd == nullptr) return Invalid(file, "missing tensor token_embd.weight");
  if (embd->n_dims != 2 || embd->ne[0] != c.embedding_length) {
    return Invalid(file, "token_embd.weight does not have shape [embedding_length, vocab]");
  }
  c.vocab_size = embd->ne[1];
  if (c.vocab_size < 1 || c.vocab_size > (int64_t{1} << 24)) {
    return Invalid(file, StrCat("vocabulary size ", c.vocab_size, " is out of range"));
  }
  c.tied_embeddings = file.FindTensor("output.weight") == nullptr;
  return c;
}

}  // namespace llm::model
