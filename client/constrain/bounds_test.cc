#include "client/constrain/bounds.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace llm::constrain {
namespace {

using ::testing::HasSubstr;

TEST(BoundsTest, JsonNestingCountsBracketsOutsideStrings) {
  EXPECT_TRUE(CheckJsonNesting(R"({"a": [[1]]})", 3).ok());
  EXPECT_THAT(CheckJsonNesting(R"({"a": [[[1]]]})", 3).message(),
              HasSubstr("nests deeper than 3 levels (at byte 8)"));
  EXPECT_TRUE(CheckJsonNesting(R"({"[[[[\"{{{{": 1})", 1).ok());
  EXPECT_TRUE(CheckJsonNesting("[][][][]", 1).ok());
}

TEST(BoundsTest, RegexNestingSkipsEscapedParentheses) {
  EXPECT_TRUE(CheckRegexNesting("((a)(b))", 2).ok());
  EXPECT_FALSE(CheckRegexNesting("(((a)))", 2).ok());
  EXPECT_TRUE(CheckRegexNesting(R"(\(\(\(a)", 1).ok());
  // A parenthesis in a class counts: over-counting is safe.
  EXPECT_FALSE(CheckRegexNesting("([(])", 1).ok());
}

TEST(BoundsTest, GrammarNestingSkipsStringsClassesAndComments) {
  EXPECT_TRUE(CheckGrammarNesting("root ::= (\"(((\" [(((] # (((\n)", 1).ok());
  EXPECT_THAT(CheckGrammarNesting("root ::= ((\"a\"))", 1).message(),
              HasSubstr("the grammar nests deeper than 1"));
  EXPECT_TRUE(CheckGrammarNesting(R"(root ::= "\"(" ("a"))", 1).ok());
}

}  // namespace
}  // namespace llm::constrain
