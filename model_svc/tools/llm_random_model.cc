// llm-random-model: writes a GGUF model with random weights, of a named shape
// and family, for benchmarks and tests on machines the real model cannot
// reach (the GPU machine: a call carries at most 64 MiB), and for llama.cpp
// to compare with (tests/data/llamacpp_families.py).
//
//   llm-random-model --shape smollm2 --out /tmp/smollm2-random.gguf
//   llm-random-model --shape llama3-8b --type bf16 --layers 4 --out /tmp/8b.gguf
//   llm-random-model --shape small --architecture gemma3 --type q8_0 --out /tmp/g.gguf
//
// --architecture (llama, qwen2, qwen3, gemma3, phi3) writes that family's
// tensors and keys (testing::ArchitectureSpec); with --shape small, also its
// toy hyperparameters (--shape tiny: a few KB, for fuzz seeds). The file says tokenizer.ggml.model
// = "none" so that llama.cpp loads it; --vocab placeholder writes a vocabulary
// of placeholder tokens instead, for llama-bench (the device check's anchor).
//
// Shapes: smollm2 (SmolLM2-135M-Instruct.Q4_1.gguf's shapes and types: Q4_1
// matrices, Q8_0 embedding tied to the LM head), llama3-8b (Llama-3-8B's
// shapes; --type sets every matrix's type, default bf16), llama3.2-1b (Llama-3.2-1B's
// shapes as Q4_K_M: Q4_K matrices, a Q6_K tied embedding), small (a 2-layer
// toy). Weights are N(0, 1/cols), norms 1 + N(0, 0.01) (testing/random_model.h).
// Cost: the file is built in memory (its size, plus one tensor as floats);
// about 10 ns per weight on one core.
#include <cstdio>
#include <fstream>
#include <optional>
#include <string>

#include "absl/flags/flag.h"
#include "common/flags.h"
#include "common/gguf/gguf.h"
#include "model_svc/model/architecture.h"
#include "model_svc/testing/random_model.h"

ABSL_FLAG(std::string, shape, "smollm2", "smollm2, llama3-8b, llama3.2-1b, small or tiny.");
ABSL_FLAG(std::string, type, "",
          "Matrix type (f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q4_k, q6_k); "
          "empty: the shape's own.");
ABSL_FLAG(std::string, vocab, "none",
          "none (tokenizer.ggml.model = \"none\") or placeholder (a SentencePiece vocabulary "
          "of placeholder tokens, which llama-bench needs: it draws random token ids).");
ABSL_FLAG(int, layers, 0, "Number of layers; 0: the shape's own.");
ABSL_FLAG(int, d_model, 0, "Hidden size; 0: the shape's own (K-quants need multiples of 256).");
ABSL_FLAG(int, ff, 0, "Feed-forward size; 0: the shape's own.");
ABSL_FLAG(int, rope_orig_context, 0,
          "> 0: Phi-3 128k-style long and short RoPE factors (phi3), or YaRN's original context "
          "(with --rope_scaling yarn): rope.scaling.original_context_length.");
ABSL_FLAG(std::string, rope_scaling, "", "rope.scaling.type: linear or yarn; empty: none.");
ABSL_FLAG(float, rope_scaling_factor, 4.0f, "rope.scaling.factor, with --rope_scaling.");
ABSL_FLAG(std::string, architecture, "",
          "Model family: llama, qwen2, qwen3, gemma3 or phi3; empty: llama without extras.");
ABSL_FLAG(std::string, out, "", "Output path (required).");
ABSL_FLAG(uint64_t, seed, 1, "Random seed (same seed, same bytes).");

namespace {

constexpr char kUsage[] =
    "llm-random-model --out PATH [--shape smollm2|llama3-8b|llama3.2-1b|small|tiny] "
    "[--architecture NAME]\n"
    "                 [--type bf16] [--layers N] [--seed N]\n"
    "Writes a GGUF model with random weights of the named shape and family.";

using llm::gguf::TensorType;
using llm::model::testing::RandomModelSpec;

}  // namespace

int main(int argc, char** argv) {
  llm::ParseFlags(argc, argv, kUsage);
  const std::string out = absl::GetFlag(FLAGS_out), shape = absl::GetFlag(FLAGS_shape);
  if (out.empty()) {
    std::fprintf(stderr, "llm-random-model: --out is required\n%s\n", kUsage);
    return 2;
  }
  RandomModelSpec spec;
  if (shape == "smollm2") {
    spec = llm::model::testing::SmolLm2Shapes();
  } else if (shape == "llama3-8b") {
    spec = llm::model::testing::Llama3_8bShapes();
  } else if (shape == "llama3.2-1b") {
    spec = llm::model::testing::Llama3_2_1bShapes();
  } else if (shape != "small" && shape != "tiny") {
    std::fprintf(stderr, "llm-random-model: unknown --shape %s\n%s\n", shape.c_str(), kUsage);
    return 2;
  }
  if (const std::string arch = absl::GetFlag(FLAGS_architecture); !arch.empty()) {
    if (llm::model::FindArchitecture(arch) == nullptr) {
      std::fprintf(stderr, "llm-random-model: unknown --architecture %s (%s)\n", arch.c_str(),
                   llm::model::SupportedArchitectures().c_str());
      return 2;
    }
    const RandomModelSpec family = llm::model::testing::ArchitectureSpec(arch);
    if (shape == "small" || shape == "tiny") {
      spec = family;
    } else {
      spec.architecture = family.architecture;
      spec.qkv_bias = family.qkv_bias, spec.fused_qkv = family.fused_qkv;
      spec.qk_norm = family.qk_norm, spec.post_norms = family.post_norms;
      spec.fused_gate_up = family.fused_gate_up, spec.rope_freqs = family.rope_freqs;
      spec.sliding_window = family.sliding_window > 0 ? 512 : 0;
    }
  }
  if (shape == "tiny") {
    // A few KB: fuzz seeds (model_load_fuzzer reads at most 64 KiB).
    spec.vocab = 32, spec.d_model = 32, spec.heads = 2, spec.kv_heads = 1, spec.ff = 32;
  }
  if (!absl::GetFlag(FLAGS_rope_scaling).empty()) {
    spec.rope_scaling_type = absl::GetFlag(FLAGS_rope_scaling);
    spec.rope_scaling_factor = absl::GetFlag(FLAGS_rope_scaling_factor);
  }
  if (absl::GetFlag(FLAGS_rope_orig_context) > 0) {
    spec.long_short_factors = spec.rope_scaling_type.empty();
    spec.rope_orig_context = absl::GetFlag(FLAGS_rope_orig_context);
  }
  const std::string vocab = absl::GetFlag(FLAGS_vocab);
  if (vocab != "none" && vocab != "placeholder") {
    std::fprintf(stderr, "llm-random-model: --vocab is none or placeholder, not %s\n",
                 vocab.c_str());
    return 2;
  }
  spec.no_vocab_key = true;
  spec.placeholder_vocab = vocab == "placeholder";
  if (!absl::GetFlag(FLAGS_type).empty()) {
    const std::optional<TensorType> type =
        llm::gguf::FindTensorTypeByName(absl::GetFlag(FLAGS_type));
    if (type.has_value()) spec.matrix_type = *type;
    if (!type.has_value()) {
      std::fprintf(stderr, "llm-random-model: unknown --type %s\n",
                   absl::GetFlag(FLAGS_type).c_str());
      return 2;
    }
    if (!spec.tied) spec.embd_type = spec.matrix_type;
  }
  if (absl::GetFlag(FLAGS_layers) > 0) spec.layers = absl::GetFlag(FLAGS_layers);
  if (absl::GetFlag(FLAGS_d_model) > 0) spec.d_model = absl::GetFlag(FLAGS_d_model);
  if (absl::GetFlag(FLAGS_ff) > 0) spec.ff = absl::GetFlag(FLAGS_ff);
  spec.seed = absl::GetFlag(FLAGS_seed);
  auto bytes = llm::model::testing::RandomModelGguf(spec);
  if (!bytes.ok()) {
    std::fprintf(stderr, "llm-random-model: %s\n", std::string(bytes.status().message()).c_str());
    return 1;
  }
  std::ofstream file(out, std::ios::binary);
  file.write(bytes->data(), static_cast<std::streamsize>(bytes->size()));
  file.close();
  if (!file) {
    std::fprintf(stderr, "llm-random-model: cannot write %s\n", out.c_str());
    return 1;
  }
  std::printf("%s: %s, %lld layers, %.1f MB\n", out.c_str(), spec.name.c_str(),
              static_cast<long long>(spec.layers), bytes->size() / 1e6);
  return 0;
}
