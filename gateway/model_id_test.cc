#include "gateway/model_id.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

namespace llm::gateway {
namespace {

TEST(ModelIdTest, FromFileName) {
  const std::vector<std::pair<const char*, const char*>> cases = {
      // The extension and a quantization go.
      {"SmolLM2-135M-Instruct.Q4_1.gguf", "SmolLM2-135M-Instruct"},
      {"gemma-3-270m-q4_k_m.gguf", "gemma-3-270m"},
      {"models/gemma-3-270m-q4_k_m.gguf", "gemma-3-270m"},
      {"/srv/m/Llama-3.2-1B-Instruct-Q4_K_M.gguf", "Llama-3.2-1B-Instruct"},
      {"qwen2.5-0.5b-instruct-fp16.GGUF", "qwen2.5-0.5b-instruct"},
      {"phi-3-mini.f16.gguf", "phi-3-mini"},
      {"Mistral-7B-v0.3-IQ4_XS.gguf", "Mistral-7B-v0.3"},
      {"tiny.BF16.gguf", "tiny"},
      {"model-IQ2_XXS.gguf", "model"},
      {"m.TQ1_0.gguf", "m"},
      // No quantization: the name stays.
      {"phi-2.gguf", "phi-2"},
      {"Llama-3.2-1B.gguf", "Llama-3.2-1B"},
      {"qwen-7b-chat", "qwen-7b-chat"},
      {"model.q.gguf", "model.q"},
      {"model-Q4_LONGER.gguf", "model-Q4_LONGER"},
      // Nothing would be left: the quantization stays.
      {"Q4_0.gguf", "Q4_0"},
      {"-Q4_0.gguf", "-Q4_0"},
      {".gguf", ".gguf"},
      {"", ""},
      // Blanks become dashes (one path segment).
      {"my model\tv2.Q8_0.gguf", "my-model-v2"},
  };
  for (const auto& [file, id] : cases) EXPECT_EQ(ModelIdFromFileName(file), id) << file;
}

TEST(ModelIdTest, DefaultFromTheFileNameElseGeneralNameElseArchitecture) {
  EXPECT_EQ(DefaultModelId("SmolLM2-135M-Instruct.Q4_1.gguf", "Smollm2 135M 8k", "llama"),
            "SmolLM2-135M-Instruct");
  // An older model server sends no file name.
  EXPECT_EQ(DefaultModelId("", "Smollm2 135M 8k/Ep2", "llama"), "Smollm2-135M-8k-Ep2");
  EXPECT_EQ(DefaultModelId("", "", "llama"), "llama");
}

TEST(ModelIdTest, QuantizationNames) {
  for (const char* q : {"F32", "f16", "BF16", "Q4_0", "q4_1", "Q5_K_M", "Q3_K_S", "Q6_K", "Q8_0",
                        "IQ4_NL", "iq4_xs", "IQ2_XXS", "IQ1_M", "TQ2_0", "MXFP4", "Q2_K", "fp16"}) {
    EXPECT_TRUE(IsQuantizationName(q)) << q;
  }
  for (const char* q : {"", "Q", "Q_4", "Q4_", "Q4__0", "Q4_K_XXXX", "F8", "2", "IQ", "Instruct",
                        "1B", "v0", "q4-0", "k4_0"}) {
    EXPECT_FALSE(IsQuantizationName(q)) << q;
  }
}

}  // namespace
}  // namespace llm::gateway
