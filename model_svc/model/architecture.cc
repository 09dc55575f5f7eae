#include "model_svc/model/architecture.h"

#include <array>

namespace llm::model {
namespace {

constexpr std::array<Architecture, 5> kArchitectures = {{
    {.name = "llama", .qkv_bias_allowed = true, .rope_freqs_allowed = true},
    {.name = "qwen2", .rope_style = RopeStyle::kNeox, .qkv_bias_allowed = true},
    {.name = "qwen3", .rope_style = RopeStyle::kNeox, .qk_norm = true},
    {.name = "gemma3",
     .rope_style = RopeStyle::kNeox,
     .activation = FfnActivation::kGeluTanh,
     .embedding_scale_sqrt_d = true,
     .qk_norm = true,
     .post_norms = true,
     .swa_pattern = 6,
     .swa_rope_base = 10000.0f},
    {.name = "phi3",
     .rope_style = RopeStyle::kNeox,
     .fused_gate_up = true,
     .long_short_factors_allowed = true},
}};

}  // namespace

const Architecture* FindArchitecture(std::string_view name) {
  for (const Architecture& a : kArchitectures) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

std::string SupportedArchitectures() {
  std::string out;
  for (const Architecture& a : kArchitectures) {
    if (!out.empty()) out += ", ";
    out += a.name;
  }
  return out;
}

}  // namespace llm::model
