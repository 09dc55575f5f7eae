#include "client/constrain/choice_grammar.h"

#include <gtest/gtest.h>

namespace llm::constrain {
namespace {

TEST(ChoiceGrammarTest, EscapesQuotesBackslashesAndControls) {
  auto g = ChoiceGrammar({"a", "say \"x\"", "back\\slash", "tab\there", "é"});
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(*g, R"(root ::= "a" | "say \"x\"" | "back\\slash" | "tab\u0009here" | "é")");
}

TEST(ChoiceGrammarTest, RefusesEmptyAndNonUtf8) {
  EXPECT_FALSE(ChoiceGrammar({""}).ok());
  EXPECT_FALSE(ChoiceGrammar({"ok", "\xc3"}).ok());
}

}  // namespace
}  // namespace llm::constrain
