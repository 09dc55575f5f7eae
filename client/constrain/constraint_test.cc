#include "client/constrain/constraint.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "client/constrain/matcher.h"
#include "client/constrain/testing_vocab.h"
#include "common/strings.h"

namespace llm::constrain {
namespace {

using ::testing::HasSubstr;
using testing::kEos;
using testing::SmallVocabulary;
using testing::Tokenize;

class CompilerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = Compiler::Create(vocab_, {.threads = 1});
    ASSERT_TRUE(c.ok()) << c.status();
    compiler_ = std::move(*c);
  }

  // Whether `text` is a complete output of `spec`: each token allowed by the
  // mask and accepted, and the end token allowed after the last.
  bool Matches(const Spec& spec, const std::string& text) {
    auto constraint = compiler_->Compile(spec);
    EXPECT_TRUE(constraint.ok()) << constraint.status();
    if (!constraint.ok()) return false;
    Matcher m(*constraint);
    std::vector<uint32_t> mask(m.mask_words());
    for (int32_t id : Tokenize(vocab_, text)) {
      EXPECT_TRUE(m.FillMask(mask).ok());
      const bool allowed = (mask[id / 32] >> (id % 32)) & 1;
      const bool accepted = m.Accept(id);
      EXPECT_EQ(allowed, accepted) << "token " << id << " of " << text;
      if (!accepted) return false;
    }
    EXPECT_TRUE(m.FillMask(mask).ok());
    const bool end_allowed = (mask[kEos / 32] >> (kEos % 32)) & 1;
    EXPECT_EQ(end_allowed, m.CanEnd());
    return end_allowed && m.Accept(kEos) && m.IsTerminated();
  }

  absl::Status CompileError(const Spec& spec) { return compiler_->Compile(spec).status(); }

  Vocabulary vocab_ = SmallVocabulary();
  std::unique_ptr<Compiler> compiler_;
};

TEST(KindNameTest, NamesEachKind) {
  EXPECT_EQ(KindName(Kind::kJsonSchema), "json_schema");
  EXPECT_EQ(KindName(Kind::kJsonObject), "json_object");
  EXPECT_EQ(KindName(Kind::kRegex), "regex");
  EXPECT_EQ(KindName(Kind::kGrammar), "grammar");
  EXPECT_EQ(KindName(Kind::kChoice), "choice");
}

TEST(CompilerCreateTest, RefusesBadVocabularies) {
  EXPECT_THAT(Compiler::Create({}).status().message(), HasSubstr("no tokens"));
  Vocabulary v = SmallVocabulary();
  v.end_ids = {v.size};
  EXPECT_THAT(Compiler::Create(v).status().message(), HasSubstr("end id"));
  v = SmallVocabulary();
  v.special_ids = {-1};
  EXPECT_THAT(Compiler::Create(v).status().message(), HasSubstr("special id -1"));
  v = SmallVocabulary();
  v.size = 3;
  EXPECT_THAT(Compiler::Create(v).status().message(), HasSubstr("below"));
}

TEST_F(CompilerTest, VocabSizeIsTheLogitCount) { EXPECT_EQ(compiler_->vocab_size(), vocab_.size); }

TEST_F(CompilerTest, JsonSchemaAcceptsValidAndRejectsInvalid) {
  const Spec spec{.kind = Kind::kJsonSchema,
                  .text = R"({"type": "object", "properties": {"name": {"type": "string"},
                     "age": {"type": "integer", "minimum": 0}}, "required": ["name"]})"};
  EXPECT_TRUE(Matches(spec, R"({"name": "abc", "age": 12})"));
  EXPECT_TRUE(Matches(spec, "{\n  \"name\":\"abc\"\n}"));
  EXPECT_FALSE(Matches(spec, R"({"age": 12})"));                 // name is required
  EXPECT_FALSE(Matches(spec, R"({"name": "abc", "age": -1})"));  // minimum
  EXPECT_FALSE(Matches(spec, R"({"name": "abc")"));              // incomplete
  EXPECT_FALSE(Matches(spec, R"({"name": 12})"));                // type
}

TEST_F(CompilerTest, PropertiesNotNamedFollowStrict) {
  const std::string schema = R"({"type": "object", "properties": {"name": {"type": "string"}}})";
  EXPECT_TRUE(Matches({.kind = Kind::kJsonSchema, .text = schema}, R"({"name": "a", "age": 1})"));
  EXPECT_FALSE(Matches({.kind = Kind::kJsonSchema, .text = schema, .strict = true},
                       R"({"name": "a", "age": 1})"));
}

TEST_F(CompilerTest, WhitespaceIsBoundedPerGap) {
  const Spec spec{.kind = Kind::kJsonSchema, .text = R"({"type": "array"})"};
  EXPECT_TRUE(Matches(spec, "[" + std::string(20, ' ') + "1]"));
  EXPECT_FALSE(Matches(spec, "[" + std::string(21, ' ') + "1]"));
  Spec wide = spec;
  wide.max_whitespace = 40;
  EXPECT_TRUE(Matches(wide, "[" + std::string(40, ' ') + "1]"));
  wide.max_whitespace = 19;
  EXPECT_THAT(CompileError(wide).message(), HasSubstr("max_whitespace 19"));
}

TEST_F(CompilerTest, CompactWhitespaceIsJsonDumpsDefault) {
  const Spec spec{.kind = Kind::kJsonSchema,
                  .text = R"({"type": "object", "properties": {"a": {"type": "integer"},
                     "b": {"type": "integer"}}, "required": ["a", "b"]})",
                  .any_whitespace = false};
  EXPECT_TRUE(Matches(spec, R"({"a": 1, "b": 2})"));
  EXPECT_FALSE(Matches(spec, R"({"a":1,"b":2})"));
  EXPECT_FALSE(Matches(spec, "{\"a\": 1,\n\"b\": 2}"));
}

TEST_F(CompilerTest, PropertyOrderFollowsAnyOrder) {
  const std::string schema = R"({"type": "object", "properties": {"a": {"type": "integer"},
                                   "b": {"type": "integer"}}})";
  EXPECT_FALSE(Matches({.kind = Kind::kJsonSchema, .text = schema}, R"({"b": 1, "a": 2})"));
  EXPECT_TRUE(Matches({.kind = Kind::kJsonSchema, .text = schema, .any_order = true},
                      R"({"b": 1, "a": 2})"));
}

TEST_F(CompilerTest, JsonObjectIsAnyObject) {
  const Spec spec{.kind = Kind::kJsonObject};
  EXPECT_TRUE(Matches(spec, R"({"x": [1, {"y": null}], "z": "abc"})"));
  EXPECT_TRUE(Matches(spec, "{}"));
  EXPECT_FALSE(Matches(spec, "[1]"));
  EXPECT_FALSE(Matches(spec, "12"));
  // strict does not turn it into the empty object.
  EXPECT_TRUE(Matches({.kind = Kind::kJsonObject, .strict = true}, R"({"x": 1})"));
}

TEST_F(CompilerTest, RegexMatchesTheWholeOutput) {
  const Spec spec{.kind = Kind::kRegex, .text = "[a-c]+[0-9]{2}"};
  EXPECT_TRUE(Matches(spec, "abc12"));
  EXPECT_FALSE(Matches(spec, "abc1"));
  EXPECT_FALSE(Matches(spec, "abc123"));
  EXPECT_FALSE(Matches(spec, "xabc12"));
}

TEST_F(CompilerTest, GbnfGrammar) {
  const Spec spec{.kind = Kind::kGrammar,
                  .text =
                      "# a comment\nroot ::= answer (\", \" answer)*\n"
                      "answer ::= \"yes\" | \"no\" | [0-9]+\n"};
  EXPECT_TRUE(Matches(spec, "yes, no, 12"));
  EXPECT_FALSE(Matches(spec, "yes,no"));
  EXPECT_FALSE(Matches(spec, "maybe"));
}

TEST_F(CompilerTest, ChoicesAreExactStrings) {
  const Spec spec{.kind = Kind::kChoice, .choices = {"yes", "no", "say \"hi\"\\\n"}};
  EXPECT_TRUE(Matches(spec, "yes"));
  EXPECT_TRUE(Matches(spec, "no"));
  EXPECT_TRUE(Matches(spec, "say \"hi\"\\\n"));
  EXPECT_FALSE(Matches(spec, "yesno"));
  EXPECT_FALSE(Matches(spec, "n"));
  EXPECT_THAT(CompileError({.kind = Kind::kChoice}).message(), HasSubstr("no choices"));
  EXPECT_THAT(CompileError({.kind = Kind::kChoice, .choices = {"a", ""}}).message(),
              HasSubstr("choice 1 is empty"));
  EXPECT_THAT(CompileError({.kind = Kind::kChoice, .choices = {"\xff"}}).message(),
              HasSubstr("not UTF-8"));
}

TEST_F(CompilerTest, ErrorsNameWhatIsWrong) {
  auto error = [&](Kind kind, std::string text) {
    absl::Status s = CompileError({.kind = kind, .text = std::move(text)});
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    return std::string(s.message());
  };
  EXPECT_THAT(error(Kind::kJsonSchema, "{\"type\": "), HasSubstr("not valid JSON"));
  EXPECT_THAT(error(Kind::kJsonSchema, "[1]"), HasSubstr("an object or a boolean"));
  EXPECT_THAT(error(Kind::kJsonSchema, R"({"type": "object", "properties": {"a": {"not": {}}}})"),
              HasSubstr("'not' at /properties/a"));
  EXPECT_THAT(error(Kind::kJsonSchema, R"({"type": "strange"})"), HasSubstr("strange"));
  EXPECT_THAT(error(Kind::kRegex, "(ab"), HasSubstr("regex: "));
  EXPECT_THAT(error(Kind::kRegex, "a{3,1}"), HasSubstr("regex: "));
  EXPECT_THAT(error(Kind::kGrammar, "root ::= \"a\" |"), HasSubstr("grammar: "));
  EXPECT_THAT(error(Kind::kGrammar, "start ::= \"a\""), HasSubstr("root"));
}

TEST_F(CompilerTest, BoundsAreCheckedBeforeCompiling) {
  // A schema of 1 MB.
  std::string big = R"({"type": "object", "properties": {)";
  for (int i = 0; big.size() < (1u << 20); ++i) {
    big += "\"p" + std::to_string(i) + "\": {\"type\": \"string\"}, ";
  }
  big += R"("last": {"type": "string"}}})";
  EXPECT_THAT(CompileError({.kind = Kind::kJsonSchema, .text = big}).message(),
              HasSubstr("the limit is 262144 bytes"));
  // 10,000 nested levels.
  std::string deep;
  for (int i = 0; i < 10000; ++i) deep += R"({"items": )";
  deep += "{}" + std::string(10000, '}');
  EXPECT_THAT(CompileError({.kind = Kind::kJsonSchema, .text = deep}).message(),
              HasSubstr("nests deeper than 64 levels"));
  EXPECT_THAT(CompileError({.kind = Kind::kRegex,
                            .text = std::string(10000, '(') + "a" + std::string(10000, ')')})
                  .message(),
              HasSubstr("regex: the regex nests deeper than 64"));
  EXPECT_THAT(
      CompileError({.kind = Kind::kGrammar,
                    .text = "root ::= " + std::string(100, '(') + "\"a\"" + std::string(100, ')')})
          .message(),
      HasSubstr("grammar: the grammar nests deeper than 64"));
}

// The schema xgrammar compiles is the rewritten one (schema_support.h):
// keywords beside an anyOf copied into each of its branches. 300 branches
// beside 30 KB of properties would be a 9 MB schema (minutes and gigabytes
// of xgrammar's compile): refused before the copies are made, naming where.
TEST_F(CompilerTest, ARewriteThatWouldGrowPastTheBoundIsRefused) {
  std::string properties;
  for (int i = 0; i < 1000; ++i) {
    properties += StrCat(i == 0 ? "" : ", ", "\"p", i, "\": {\"type\": \"string\"}");
  }
  std::string branches;
  for (int i = 0; i < 300; ++i)
    branches += StrCat(i == 0 ? "" : ", ", "{\"required\": [\"p", i, "\"]}");
  const std::string schema = StrCat(R"({"type": "object", "properties": {)", properties,
                                    R"(}, "anyOf": [)", branches, "]}");
  ASSERT_LT(schema.size(), 256u * 1024);
  const absl::Status s = CompileError({.kind = Kind::kJsonSchema, .text = schema});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("more than 262144 bytes")) << s;
  EXPECT_THAT(s.message(), HasSubstr("at /")) << s;
  // The same with a few branches compiles (and is enforced).
  const Spec few{.kind = Kind::kJsonSchema,
                 .text = R"({"type": "object", "properties": {"name": {"type": "string"}, "age":
                             {"type": "integer"}}, "anyOf": [{"required": ["name"]},
                             {"required": ["age"]}]})"};
  EXPECT_TRUE(Matches(few, R"({"age": 12})"));
  EXPECT_FALSE(Matches(few, "{}"));
}

// A constraint whose language is empty (a character class of nothing) has
// no first token: refused when compiled, not a generation that cannot start.
TEST_F(CompilerTest, AConstraintThatAllowsNothingIsRefused) {
  for (const Spec& spec :
       {Spec{.kind = Kind::kRegex, .text = R"([^\s\S])"},
        Spec{.kind = Kind::kGrammar, .text = R"(root ::= [^\x00-\U0010FFFF])"}}) {
    const absl::Status s = CompileError(spec);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << spec.text << ": " << s;
    EXPECT_THAT(s.message(), HasSubstr("allows no output")) << spec.text;
  }
}

TEST_F(CompilerTest, RecursiveRefCompiles) {
  const Spec spec{.kind = Kind::kJsonSchema,
                  .text = R"({"$defs": {"node": {"type": "object", "properties": {
                     "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}},
                     "required": ["next"]}}, "$ref": "#/$defs/node"})"};
  EXPECT_TRUE(Matches(spec, R"({"next": {"next": {"next": null}}})"));
  EXPECT_FALSE(Matches(spec, R"({"next": {"next": 1}})"));
  // A reference to itself and nothing else has no instance xgrammar can
  // build: an error, not a hang.
  absl::Status loop =
      CompileError({.kind = Kind::kJsonSchema, .text = R"({"$defs": {"a": {"$ref": "#/$defs/a"}},
                                                "$ref": "#/$defs/a"})"});
  EXPECT_EQ(loop.code(), absl::StatusCode::kInvalidArgument) << loop;
}

TEST_F(CompilerTest, CacheAnswersASpecSeenBefore) {
  const Spec spec{.kind = Kind::kRegex, .text = "[0-9]+"};
  auto first = compiler_->Compile(spec);
  ASSERT_TRUE(first.ok());
  auto second = compiler_->Compile(spec);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(first->get(), second->get());
  Spec other = spec;
  other.text = "[0-9]*";
  ASSERT_TRUE(compiler_->Compile(other).ok());
  // Errors are cached too.
  EXPECT_FALSE(compiler_->Compile({.kind = Kind::kRegex, .text = "("}).ok());
  EXPECT_FALSE(compiler_->Compile({.kind = Kind::kRegex, .text = "("}).ok());
  const Compiler::CacheStats stats = compiler_->cache_stats();
  EXPECT_EQ(stats.misses, 3);
  EXPECT_EQ(stats.hits, 2);
  EXPECT_EQ(stats.entries, 3u);
  EXPECT_GT(stats.bytes, 0u);
}

TEST_F(CompilerTest, ThreadsCompilingOneSpecCompileItOnce) {
  const Spec spec{.kind = Kind::kJsonSchema,
                  .text = R"({"type": "object", "properties": {"x": {"type": "number"}}})"};
  std::vector<std::thread> threads;
  std::vector<const Constraint*> got(8);
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      auto c = compiler_->Compile(spec);
      got[i] = c.ok() ? c->get() : nullptr;
    });
  }
  for (auto& t : threads) t.join();
  for (const Constraint* c : got) EXPECT_EQ(c, got[0]);
  EXPECT_NE(got[0], nullptr);
  EXPECT_EQ(compiler_->cache_stats().misses, 1);
}

TEST(CompilerLazyTest, LargeGrammarsCompileLazilyToTheSameLanguage) {
  const Spec spec{.kind = Kind::kJsonSchema,
                  .text = R"({"type": "object", "properties": {"name": {"type": "string"},
                     "n": {"type": "integer", "maximum": 99}}, "required": ["n"]})"};
  auto eager = Compiler::Create(SmallVocabulary(), {.threads = 1});
  auto lazy = Compiler::Create(SmallVocabulary(), {.threads = 1, .eager_compile_limit = 0});
  ASSERT_TRUE(eager.ok() && lazy.ok());
  auto e = (*eager)->Compile(spec);
  auto l = (*lazy)->Compile(spec);
  ASSERT_TRUE(e.ok() && l.ok());
  EXPECT_FALSE((*e)->lazy());
  EXPECT_TRUE((*l)->lazy());
  const Vocabulary vocab = SmallVocabulary();
  for (const char* text : {R"({"name": "abc", "n": 12})", R"({"n": 100})", R"({"name": 1})"}) {
    Matcher me(*e);
    Matcher ml(*l);
    std::vector<uint32_t> mask_e(me.mask_words());
    std::vector<uint32_t> mask_l(ml.mask_words());
    for (int32_t id : Tokenize(vocab, text)) {
      ASSERT_TRUE(me.FillMask(mask_e).ok());
      ASSERT_TRUE(ml.FillMask(mask_l).ok());
      EXPECT_EQ(mask_e, mask_l) << text;
      if (me.Accept(id) != ml.Accept(id)) ADD_FAILURE() << text;
    }
  }
}

TEST(CompilerThreadsTest, SpecsCompileAndMatchOnManyThreadsAtOnce) {
  // Lazy: the first masks fill the shared constraint's table under its lock.
  auto compiler = Compiler::Create(SmallVocabulary(), {.threads = 2, .eager_compile_limit = 0});
  ASSERT_TRUE(compiler.ok());
  const Vocabulary vocab = SmallVocabulary();
  std::vector<std::thread> threads;
  std::vector<int> matched(8, -1);
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      // Two specs, four threads each: compiles of different specs overlap.
      const std::string bound = std::to_string(10 + i % 2);
      auto c = (*compiler)->Compile(
          {.kind = Kind::kJsonSchema,
           .text = R"({"type": "array", "items": {"type": "integer", "maximum": )" + bound + "}}"});
      if (!c.ok()) return;
      Matcher m(*c);
      std::vector<uint32_t> mask(m.mask_words());
      int ok = 1;
      for (int32_t id : Tokenize(vocab, "[1, 2, 10]")) {
        ok &= m.FillMask(mask).ok() && m.Accept(id);
      }
      matched[i] = ok && m.CanEnd();
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < 8; ++i) EXPECT_EQ(matched[i], 1) << i;
  EXPECT_EQ((*compiler)->cache_stats().misses, 2);
}

TEST(CompilerCacheTest, EvictsTheLeastRecentlyUsed) {
  auto compiler = Compiler::Create(SmallVocabulary(), {.cache_entries = 2, .threads = 1});
  ASSERT_TRUE(compiler.ok());
  for (const char* re : {"a", "b", "a", "c"}) {
    ASSERT_TRUE((*compiler)->Compile({.kind = Kind::kRegex, .text = re}).ok());
  }
  // "b" went; "a" (used again) stayed.
  EXPECT_EQ((*compiler)->cache_stats().evictions, 1);
  ASSERT_TRUE((*compiler)->Compile({.kind = Kind::kRegex, .text = "a"}).ok());
  EXPECT_EQ((*compiler)->cache_stats().hits, 2);
  ASSERT_TRUE((*compiler)->Compile({.kind = Kind::kRegex, .text = "b"}).ok());
  EXPECT_EQ((*compiler)->cache_stats().misses, 4);
}

}  // namespace
}  // namespace llm::constrain
