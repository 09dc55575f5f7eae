#include "common/utf8.h"

#include <gtest/gtest.h>

namespace llm {
namespace {

TEST(Utf8Test, CompletePrefixHoldsOnlyAnUnfinishedCharacter) {
  EXPECT_EQ(CompleteUtf8Prefix(""), 0u);
  EXPECT_EQ(CompleteUtf8Prefix("abc"), 3u);
  EXPECT_EQ(CompleteUtf8Prefix("a\xE4"), 1u);          // 1 of 3 bytes of 中
  EXPECT_EQ(CompleteUtf8Prefix("a\xE4\xB8"), 1u);      // 2 of 3
  EXPECT_EQ(CompleteUtf8Prefix("a\xE4\xB8\xAD"), 4u);  // complete
  EXPECT_EQ(CompleteUtf8Prefix("\xF0\x9F\x98"), 0u);   // 3 of 4 bytes of an emoji
  EXPECT_EQ(CompleteUtf8Prefix("a\x80"), 2u);          // stray continuation: never valid
  EXPECT_EQ(CompleteUtf8Prefix("a\xFF"), 2u);          // never valid
  EXPECT_EQ(CompleteUtf8Prefix("a\xE0\x80"), 3u);      // overlong start: never valid
  EXPECT_EQ(CompleteUtf8Prefix("a\xED\xA0"), 3u);      // surrogate: never valid
}

TEST(Utf8Test, DecodeRejectsInvalidSequences) {
  size_t len = 0;
  EXPECT_EQ(DecodeUtf8("\xE4\xB8\xAD", 0, &len), 0x4E2D);
  EXPECT_EQ(len, 3u);
  EXPECT_EQ(DecodeUtf8("\xE4\xB8", 0, &len), -1);
  EXPECT_EQ(len, 1u);
  EXPECT_EQ(DecodeUtf8("\xC0\xAF", 0, &len), -1);  // overlong '/'
}

}  // namespace
}  // namespace llm
