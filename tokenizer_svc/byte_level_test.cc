#include "tokenizer_svc/byte_level.h"

#include <gtest/gtest.h>

#include <string>

namespace llm::tok {
namespace {

TEST(ByteLevelTest, RoundTripsEveryByte) {
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  bool exact = false;
  EXPECT_EQ(ByteLevelDecode(ByteLevelEncode(all), &exact), all);
  EXPECT_TRUE(exact);
  EXPECT_EQ(ByteLevelEncode(" "), "\xC4\xA0");   // Ġ
  EXPECT_EQ(ByteLevelEncode("\n"), "\xC4\x8A");  // Ċ
  EXPECT_EQ(ByteLevelDecode("<|endoftext|>", &exact), "<|endoftext|>");
  ByteLevelDecode("\xE4\xB8\xAD", &exact);  // not in the table: copied, flagged
  EXPECT_FALSE(exact);
}

}  // namespace
}  // namespace llm::tok
