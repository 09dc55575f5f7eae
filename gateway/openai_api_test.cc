#include "gateway/openai_api.h"

#include "gtest/gtest.h"

namespace llm::gateway {
namespace {

TEST(OpenAiJsonTest, CompletionAndChunks) {
  nlohmann::json c = ChatCompletionJson(
      "id1", 5, "m",
      {{"Paris.", client::StopReason::kEos}, {"Par", client::StopReason::kMaxTokens}}, 10, 4);
  EXPECT_EQ(c["object"], "chat.completion");
  EXPECT_EQ(c["choices"][0]["message"]["content"], "Paris.");
  EXPECT_EQ(c["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(c["choices"][1]["finish_reason"], "length");
  EXPECT_EQ(c["choices"][1]["index"], 1);
  EXPECT_EQ(c["usage"]["total_tokens"], 14);
  nlohmann::json chunk = ChatChunkJson("id1", 5, "m", 0, {{"content", "P"}}, "", true);
  EXPECT_EQ(chunk["object"], "chat.completion.chunk");
  EXPECT_TRUE(chunk["choices"][0]["finish_reason"].is_null());
  EXPECT_TRUE(chunk.contains("usage"));
  EXPECT_TRUE(chunk["usage"].is_null());
  nlohmann::json last = UsageChunkJson("id1", 5, "m", 10, 4);
  EXPECT_TRUE(last["choices"].empty());
  EXPECT_EQ(last["usage"]["completion_tokens"], 4);
  EXPECT_EQ(FinishReason(client::StopReason::kStopString), "stop");
  EXPECT_EQ(FinishReason(client::StopReason::kContext), "length");
}

}  // namespace
}  // namespace llm::gateway
