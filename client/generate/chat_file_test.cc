// The chat file of `llm chat --save/--resume`: a round trip, and every kind
// of damage refused with INVALID_ARGUMENT naming what (never a crash).
#include "client/generate/chat_file.h"

#include <string>

#include "gtest/gtest.h"

namespace llm::client {
namespace {

ChatFile Sample() {
  ChatFile f;
  f.messages = {{.role = "user", .content = "Hi"}, {.role = "assistant", .content = "Hello!"}};
  f.text = "<|im_start|>user\nHi<|im_end|>\n";
  f.tokens = {1, 2, 3, 49151};
  f.snapshot = std::string("LLMKVSNP\0\1", 10);
  return f;
}

TEST(ChatFileTest, RoundTrips) {
  absl::StatusOr<ChatFile> back = DecodeChatFile(EncodeChatFile(Sample()));
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->messages.size(), 2u);
  EXPECT_EQ(back->messages[1].role, "assistant");
  EXPECT_EQ(back->messages[1].content, "Hello!");
  EXPECT_EQ(back->text, Sample().text);
  EXPECT_EQ(back->tokens, Sample().tokens);
  EXPECT_EQ(back->snapshot, Sample().snapshot);
  EXPECT_TRUE(DecodeChatFile(EncodeChatFile(ChatFile())).ok());
}

TEST(ChatFileTest, DamageIsInvalidArgumentNamingWhat) {
  const std::string good = EncodeChatFile(Sample());
  // Every truncation.
  for (size_t n = 0; n < good.size(); ++n) {
    EXPECT_EQ(DecodeChatFile(good.substr(0, n)).status().code(), absl::StatusCode::kInvalidArgument)
        << n;
  }
  std::string bad = good;
  bad[8] = 9;  // the version
  EXPECT_NE(DecodeChatFile(bad).status().message().find("version 9"), std::string::npos);
  bad = good;
  bad[12] = bad[13] = bad[14] = bad[15] = '\xff';  // 2^32-1 messages
  EXPECT_NE(DecodeChatFile(bad).status().message().find("do not fit"), std::string::npos);
  bad = good;
  bad[16] = '\xff';  // the first role's length
  EXPECT_NE(DecodeChatFile(bad).status().message().find("message 0's role"), std::string::npos);
  bad = good + "x";
  EXPECT_NE(DecodeChatFile(bad).status().message().find("after the snapshot"), std::string::npos);
  bad = good;
  bad[0] = 'X';
  EXPECT_NE(DecodeChatFile(bad).status().message().find("not a chat file"), std::string::npos);
}

}  // namespace
}  // namespace llm::client
