#include "client/constrain/matcher.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "client/constrain/constraint.h"
#include "client/constrain/testing_vocab.h"

namespace llm::constrain {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::kControl;
using testing::kEos;
using testing::SmallVocabulary;
using testing::Tokenize;

bool Allowed(const std::vector<uint32_t>& mask, int32_t id) {
  return (mask[id / 32] >> (id % 32)) & 1;
}

int Count(const std::vector<uint32_t>& mask) {
  int n = 0;
  for (uint32_t w : mask) n += __builtin_popcount(w);
  return n;
}

class MatcherTest : public ::testing::Test {
 protected:
  std::shared_ptr<const Constraint> Compile(const Spec& spec) {
    if (compiler_ == nullptr) {
      auto c = Compiler::Create(vocab_, {.threads = 1});
      EXPECT_TRUE(c.ok()) << c.status();
      compiler_ = std::move(*c);
    }
    auto constraint = compiler_->Compile(spec);
    EXPECT_TRUE(constraint.ok()) << constraint.status();
    return *constraint;
  }

  int32_t Id(const std::string& piece) {
    const std::vector<int32_t> ids = Tokenize(vocab_, piece);
    EXPECT_EQ(ids.size(), 1u) << piece;
    return ids[0];
  }

  Vocabulary vocab_ = SmallVocabulary();
  std::unique_ptr<Compiler> compiler_;
};

TEST_F(MatcherTest, MaskCoversThePaddedVocabulary) {
  Matcher m(Compile({.kind = Kind::kChoice, .choices = {"yes", "no"}}));
  EXPECT_EQ(m.vocab_size(), vocab_.size);
  EXPECT_EQ(m.mask_words(), (vocab_.size + 31) / 32);
  std::vector<uint32_t> wrong(m.mask_words() + 1);
  EXPECT_THAT(m.FillMask(wrong).message(), HasSubstr("needs"));
}

TEST_F(MatcherTest, MaskAllowsExactlyTheNextTokens) {
  Matcher m(Compile({.kind = Kind::kChoice, .choices = {"yes", "no"}}));
  std::vector<uint32_t> mask(m.mask_words(), 0xffffffffu);
  ASSERT_TRUE(m.FillMask(mask).ok());
  EXPECT_TRUE(Allowed(mask, 'y'));
  EXPECT_TRUE(Allowed(mask, 'n'));
  EXPECT_TRUE(Allowed(mask, Id("yes")));
  EXPECT_TRUE(Allowed(mask, Id("no")));
  EXPECT_FALSE(Allowed(mask, 'x'));
  EXPECT_FALSE(Allowed(mask, kEos));
  EXPECT_FALSE(Allowed(mask, kControl));
  EXPECT_EQ(Count(mask), 4);  // no bit past the vocabulary either
}

TEST_F(MatcherTest, AcceptRollbackAndEnd) {
  Matcher m(Compile({.kind = Kind::kChoice, .choices = {"yes", "no"}}));
  EXPECT_FALSE(m.Accept('x'));
  EXPECT_FALSE(m.Accept(kControl));
  EXPECT_FALSE(m.Accept(-1));
  EXPECT_FALSE(m.Accept(vocab_.size));
  EXPECT_EQ(m.accepted(), 0);
  ASSERT_TRUE(m.Accept('y'));
  ASSERT_TRUE(m.Accept('e'));
  EXPECT_FALSE(m.CanEnd());
  ASSERT_TRUE(m.Rollback(1).ok());
  EXPECT_EQ(m.accepted(), 1);
  EXPECT_THAT(m.Rollback(2).message(), HasSubstr("1 were accepted"));
  EXPECT_FALSE(m.Rollback(-1).ok());
  ASSERT_TRUE(m.Accept('e'));
  ASSERT_TRUE(m.Accept('s'));
  EXPECT_TRUE(m.CanEnd());
  std::vector<uint32_t> mask(m.mask_words());
  ASSERT_TRUE(m.FillMask(mask).ok());
  EXPECT_TRUE(Allowed(mask, kEos));
  EXPECT_EQ(Count(mask), 1);
  EXPECT_FALSE(m.IsTerminated());
  ASSERT_TRUE(m.Accept(kEos));
  EXPECT_TRUE(m.IsTerminated());
  EXPECT_FALSE(m.Accept('s'));
  EXPECT_EQ(m.FillMask(mask).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(m.ForcedTokens().empty());
  // Rolling the end back un-terminates.
  ASSERT_TRUE(m.Rollback(1).ok());
  EXPECT_FALSE(m.IsTerminated());
  EXPECT_TRUE(m.FillMask(mask).ok());
  m.Reset();
  EXPECT_EQ(m.accepted(), 0);
  EXPECT_TRUE(m.Accept('n'));
}

// A state no token continues (here: "a" then a character class of
// nothing) is an error naming it, never an empty mask that a model service
// would refuse.
TEST_F(MatcherTest, AStateNoTokenContinuesIsAnError) {
  Matcher m(Compile({.kind = Kind::kGrammar, .text = R"(root ::= "a" [^\x00-\U0010FFFF])"}));
  std::vector<uint32_t> mask(m.mask_words());
  ASSERT_TRUE(m.FillMask(mask).ok());
  EXPECT_TRUE(Allowed(mask, 'a'));
  ASSERT_TRUE(m.Accept('a'));
  const absl::Status s = m.FillMask(mask);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("allows no token after the 1 tokens accepted")) << s;
}

TEST_F(MatcherTest, ForcedTokensSpellTheUniqueContinuation) {
  Matcher m(Compile({.kind = Kind::kJsonSchema,
                     .text = R"({"type": "object", "properties": {"name": {"type": "string"}},
                                 "required": ["name"]})",
                     .strict = true,
                     .any_whitespace = false}));
  EXPECT_EQ(m.ForcedText(), "{\"name\": \"");
  // The longest pieces, greedily: {" name ": , and not the last '"', which
  // the longer tokens "} and ", could extend.
  const std::vector<int32_t> forced = m.ForcedTokens();
  std::string spelled;
  for (int32_t id : forced) spelled += vocab_.token_bytes[id];
  EXPECT_EQ(spelled, "{\"name\": ");
  EXPECT_THAT(forced, ElementsAre(Id("{\""), Id("name"), Id("\": ")));
  for (int32_t id : forced) ASSERT_TRUE(m.Accept(id)) << spelled;
  EXPECT_EQ(m.ForcedText(), "\"");
  EXPECT_TRUE(m.ForcedTokens().empty());  // '"' alone: still a prefix of "} and ",
  ASSERT_TRUE(m.Accept('"'));
  // Inside the string nothing is forced.
  ASSERT_TRUE(m.Accept('a'));
  EXPECT_TRUE(m.ForcedTokens().empty());
  ASSERT_TRUE(m.Accept('"'));
  EXPECT_EQ(m.ForcedText(), "}");
  EXPECT_THAT(m.ForcedTokens(), ElementsAre('}'));
}

TEST_F(MatcherTest, ManyMatchersShareAConstraint) {
  auto c = Compile({.kind = Kind::kRegex, .text = "a+b"});
  Matcher a(c);
  Matcher b(c);
  ASSERT_TRUE(a.Accept('a'));
  EXPECT_FALSE(b.Accept('b'));
  EXPECT_TRUE(b.Accept('a'));
  EXPECT_TRUE(a.Accept('b'));
  EXPECT_TRUE(a.CanEnd());
  EXPECT_FALSE(b.CanEnd());
  Matcher moved = std::move(a);
  EXPECT_TRUE(moved.CanEnd());
}

}  // namespace
}  // namespace llm::constrain
