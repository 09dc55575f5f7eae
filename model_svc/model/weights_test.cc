// LocateWeights' checks that guard allocations (found by model_load_fuzzer);
// the random model's placeholder vocabulary (for llama-bench).
#include "model_svc/model/weights.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model_svc/testing/random_model.h"

namespace llm::model {
namespace {

TEST(WeightsTest, BlockCountTheTensorsCannotBackIsAnError) {
  testing::RandomModelSpec spec;
  spec.layers = 1000000;  // metadata only: no layer tensors at all
  spec.config_only = true;
  auto file = testing::RandomModelFile(spec);
  ASSERT_TRUE(file.ok()) << file.status();
  auto config = ModelConfig::FromGguf(**file);
  ASSERT_TRUE(config.ok()) << config.status();
  auto weights = LocateWeights(**file, *config);
  EXPECT_EQ(weights.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(weights.status().message()),
              ::testing::HasSubstr("block_count 1000000 needs at least 6000000 layer tensors"));
}

// What llama.cpp's SentencePiece loader reads: the model "llama", one token
// per embedding row, the byte tokens it looks the newline up by, and token
// types; the model itself loads as before.
TEST(WeightsTest, PlaceholderVocabIsASentencePieceVocabularyOfTheModelsSize) {
  testing::RandomModelSpec spec;
  spec.vocab = 300;
  spec.placeholder_vocab = true;
  auto file = testing::RandomModelFile(spec);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(*(*file)->GetString("tokenizer.ggml.model"), "llama");
  const gguf::Value* tokens = (*file)->Find("tokenizer.ggml.tokens");
  ASSERT_NE(tokens, nullptr);
  auto names = tokens->AsStringArray();
  ASSERT_TRUE(names.ok()) << names.status();
  ASSERT_EQ(names->size(), 300u);
  EXPECT_EQ((*names)[0], "<unk>");
  EXPECT_EQ((*names)[2], "</s>");
  EXPECT_EQ((*names)[3 + '\n'], "<0x0A>");
  EXPECT_EQ((*names)[258], "<0xFF>");
  EXPECT_EQ((*names)[299], "t299");
  EXPECT_NE((*file)->Find("tokenizer.ggml.scores"), nullptr);
  EXPECT_NE((*file)->Find("tokenizer.ggml.token_type"), nullptr);
  auto config = ModelConfig::FromGguf(**file);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(LocateWeights(**file, *config).ok());

  spec.vocab = 258;  // no room for the byte tokens
  EXPECT_EQ(testing::RandomModelFile(spec).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace llm::model
