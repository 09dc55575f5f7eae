#include "client/generate/utf8_text.h"

#include "gtest/gtest.h"

namespace llm::client {
namespace {

TEST(Utf8TextTest, ValidTextIsUnchanged) {
  for (const char* s : {"", "plain", "caf\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80"}) {
    EXPECT_TRUE(IsValidUtf8(s)) << s;
    EXPECT_EQ(SanitizeUtf8(s), s);
  }
}

TEST(Utf8TextTest, InvalidSequencesBecomeReplacementCharacters) {
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(SanitizeUtf8("a\xFF"
                         "b"),
            "a" + fffd + "b");
  EXPECT_EQ(SanitizeUtf8("\xC3"), fffd);  // truncated at the end
  EXPECT_EQ(SanitizeUtf8("\xE2\x82"
                         "x"),
            fffd + "x");                                        // one maximal subpart
  EXPECT_EQ(SanitizeUtf8("\xC0\xAF"), fffd + fffd);             // overlong lead, then a stray
  EXPECT_EQ(SanitizeUtf8("\xED\xA0\x80"), fffd + fffd + fffd);  // surrogate
  EXPECT_EQ(SanitizeUtf8("\xF4\x90\x80\x80"), fffd + fffd + fffd + fffd);  // > U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xF0\x9F\x98"));
}

TEST(Utf8TextTest, CompletePrefixHoldsOnlyIncompleteCharacters) {
  EXPECT_EQ(CompleteUtf8Prefix("abc"), 3u);
  EXPECT_EQ(CompleteUtf8Prefix("ab\xC3"), 2u);        // é started
  EXPECT_EQ(CompleteUtf8Prefix("ab\xC3\xA9"), 4u);    // é complete
  EXPECT_EQ(CompleteUtf8Prefix("\xF0\x9F\x98"), 0u);  // 3 of 4 bytes
  EXPECT_EQ(CompleteUtf8Prefix("a\xE2\x82"), 1u);
  EXPECT_EQ(CompleteUtf8Prefix("a\xFF"), 2u);      // never valid: released
  EXPECT_EQ(CompleteUtf8Prefix("a\xE0\x80"), 3u);  // overlong: released
  EXPECT_EQ(CompleteUtf8Prefix("a\x80"), 2u);      // stray continuation
  EXPECT_EQ(CompleteUtf8Prefix(""), 0u);
}

}  // namespace
}  // namespace llm::client
