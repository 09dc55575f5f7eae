// The C interface, through the shared library itself (libllm_constrain.so).
#include "client/constrain/c_api.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "client/constrain/testing_vocab.h"
#include "common/token_mask.h"

namespace llm::constrain {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::kControl;
using testing::kEos;
using testing::SmallVocabulary;
using testing::Tokenize;

constexpr int kInvalidArgument = 3;
constexpr int kFailedPrecondition = 9;

// A message from the library, freed.
std::string Take(char* error) {
  std::string s = error == nullptr ? "" : error;
  llm_constrain_free_error(error);
  return s;
}

class CApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string bytes;
    std::vector<int64_t> offsets = {0};
    for (const std::string& t : vocab_.token_bytes) {
      bytes += t;
      offsets.push_back(static_cast<int64_t>(bytes.size()));
    }
    char* error = nullptr;
    ASSERT_EQ(llm_constrain_compiler_create(
                  bytes.data(), offsets.data(), static_cast<int32_t>(vocab_.token_bytes.size()),
                  vocab_.end_ids.data(), static_cast<int32_t>(vocab_.end_ids.size()),
                  vocab_.special_ids.data(), static_cast<int32_t>(vocab_.special_ids.size()),
                  vocab_.size, &compiler_, &error),
              0)
        << Take(error);
    EXPECT_EQ(error, nullptr);
  }

  void TearDown() override {
    for (LlmConstrainMatcher* m : matchers_) llm_constrain_matcher_free(m);
    for (LlmConstrainConstraint* c : constraints_) llm_constrain_constraint_free(c);
    llm_constrain_compiler_free(compiler_);
  }

  // Compiles (code 0 expected) and returns a new matcher.
  LlmConstrainMatcher* Matcher(int32_t kind, const std::string& text, uint32_t flags = 0,
                               const std::vector<std::string>& choices = {}) {
    std::string choice_bytes;
    std::vector<int64_t> choice_offsets = {0};
    for (const std::string& c : choices) {
      choice_bytes += c;
      choice_offsets.push_back(static_cast<int64_t>(choice_bytes.size()));
    }
    LlmConstrainConstraint* c = nullptr;
    char* error = nullptr;
    const int code = llm_constrain_compile(
        compiler_, kind, text.data(), text.size(), choice_bytes.data(), choice_offsets.data(),
        static_cast<int32_t>(choices.size()), flags, 20, &c, &error);
    EXPECT_EQ(code, 0) << Take(error);
    if (c == nullptr) return nullptr;
    constraints_.push_back(c);
    LlmConstrainMatcher* m = nullptr;
    EXPECT_EQ(llm_constrain_matcher_create(c, &m, &error), 0) << Take(error);
    matchers_.push_back(m);
    return m;
  }

  std::vector<uint32_t> Mask(LlmConstrainMatcher* m) {
    std::vector<uint32_t> words((vocab_.size + 31) / 32, 0xffffffffu);
    char* error = nullptr;
    EXPECT_EQ(llm_constrain_matcher_fill_mask(m, words.data(), static_cast<int32_t>(words.size()),
                                              &error),
              0)
        << Take(error);
    return words;
  }

  int32_t Id(const std::string& piece) {
    const std::vector<int32_t> ids = Tokenize(vocab_, piece);
    EXPECT_EQ(ids.size(), 1u) << piece;
    return ids[0];
  }

  Vocabulary vocab_ = SmallVocabulary();
  LlmConstrainCompiler* compiler_ = nullptr;
  std::vector<LlmConstrainConstraint*> constraints_;
  std::vector<LlmConstrainMatcher*> matchers_;
};

bool Allowed(const std::vector<uint32_t>& mask, int32_t id) {
  return ((mask[id / 32] >> (id % 32)) & 1) != 0;
}

TEST_F(CApiTest, AbiVersionIsTheHeaders) {
  EXPECT_EQ(llm_constrain_abi_version(), LLM_CONSTRAIN_ABI_VERSION);
}

TEST_F(CApiTest, ChoiceMaskAcceptRollbackAndEnd) {
  LlmConstrainMatcher* m = Matcher(LLM_CONSTRAIN_CHOICE, "", 0, {"yes", "no"});
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(llm_constrain_constraint_vocab_size(constraints_[0]), vocab_.size);
  std::vector<uint32_t> mask = Mask(m);
  EXPECT_TRUE(Allowed(mask, 'y'));
  EXPECT_TRUE(Allowed(mask, Id("yes")));
  EXPECT_TRUE(Allowed(mask, Id("no")));
  EXPECT_FALSE(Allowed(mask, 'a'));
  EXPECT_FALSE(Allowed(mask, kEos));
  EXPECT_FALSE(Allowed(mask, kControl));
  EXPECT_FALSE(Allowed(mask, vocab_.size - 1));  // padding
  EXPECT_EQ(llm_constrain_matcher_accept(m, 'a'), 0);
  EXPECT_EQ(llm_constrain_matcher_accepted(m), 0);
  EXPECT_EQ(llm_constrain_matcher_accept(m, 'y'), 1);
  EXPECT_EQ(llm_constrain_matcher_can_end(m), 0);
  // "es" is forced: the grammar allows nothing else.
  int32_t forced[4] = {};
  ASSERT_EQ(llm_constrain_matcher_forced_tokens(m, forced, 4), 2);
  EXPECT_THAT(std::vector<int32_t>(forced, forced + 2), ElementsAre('e', 's'));
  EXPECT_EQ(llm_constrain_matcher_forced_tokens(m, forced, 1), 2);  // a count past capacity
  EXPECT_EQ(llm_constrain_matcher_accept(m, 'e'), 1);
  EXPECT_EQ(llm_constrain_matcher_accept(m, 's'), 1);
  EXPECT_EQ(llm_constrain_matcher_can_end(m), 1);
  mask = Mask(m);
  EXPECT_TRUE(Allowed(mask, kEos));
  EXPECT_EQ(llm_constrain_matcher_accept(m, kEos), 1);
  EXPECT_EQ(llm_constrain_matcher_is_terminated(m), 1);
  EXPECT_EQ(llm_constrain_matcher_accepted(m), 4);

  std::vector<uint32_t> words((vocab_.size + 31) / 32);
  char* error = nullptr;
  EXPECT_EQ(
      llm_constrain_matcher_fill_mask(m, words.data(), static_cast<int32_t>(words.size()), &error),
      kFailedPrecondition);
  EXPECT_THAT(Take(error), HasSubstr("terminated"));
  ASSERT_EQ(llm_constrain_matcher_rollback(m, 3, &error), 0);
  EXPECT_EQ(error, nullptr);
  EXPECT_EQ(llm_constrain_matcher_is_terminated(m), 0);
  EXPECT_EQ(llm_constrain_matcher_accepted(m), 1);
  EXPECT_EQ(llm_constrain_matcher_rollback(m, 2, &error), kInvalidArgument);
  EXPECT_THAT(Take(error), HasSubstr("cannot roll back 2 tokens"));
  llm_constrain_matcher_reset(m);
  EXPECT_EQ(llm_constrain_matcher_accepted(m), 0);
  EXPECT_EQ(llm_constrain_matcher_accept(m, Id("no")), 1);
}

TEST_F(CApiTest, ASchemaThatDoesNotCompileNamesTheKeyword) {
  const std::string schema = R"({"type": "object", "properties": {"a": {"not": {}}}})";
  LlmConstrainConstraint* c = nullptr;
  char* error = nullptr;
  EXPECT_EQ(llm_constrain_compile(compiler_, LLM_CONSTRAIN_JSON_SCHEMA, schema.data(),
                                  schema.size(), nullptr, nullptr, 0, 0, 20, &c, &error),
            kInvalidArgument);
  EXPECT_EQ(c, nullptr);
  EXPECT_THAT(Take(error), HasSubstr("unsupported JSON Schema keyword 'not' at /properties/a"));
  // LLM_CONSTRAIN_LENIENT: xgrammar's own behaviour, the keyword ignored.
  EXPECT_NE(Matcher(LLM_CONSTRAIN_JSON_SCHEMA, schema, LLM_CONSTRAIN_LENIENT), nullptr);
}

TEST_F(CApiTest, BadArgumentsAreErrorsNotCrashes) {
  LlmConstrainConstraint* c = nullptr;
  char* error = nullptr;
  EXPECT_EQ(llm_constrain_compile(compiler_, 99, "", 0, nullptr, nullptr, 0, 0, 20, &c, &error),
            kInvalidArgument);
  EXPECT_THAT(Take(error), HasSubstr("unknown constraint kind 99"));
  EXPECT_EQ(llm_constrain_compile(compiler_, LLM_CONSTRAIN_REGEX, "a(", 2, nullptr, nullptr, 0, 0,
                                  20, &c, &error),
            kInvalidArgument);
  EXPECT_THAT(Take(error), HasSubstr("regex"));
  EXPECT_EQ(llm_constrain_compile(compiler_, LLM_CONSTRAIN_JSON_OBJECT, nullptr, 0, nullptr,
                                  nullptr, 0, 64, 20, &c, &error),
            kInvalidArgument);
  EXPECT_THAT(Take(error), HasSubstr("unknown flags 64"));
  EXPECT_EQ(llm_constrain_compile(nullptr, LLM_CONSTRAIN_JSON_OBJECT, nullptr, 0, nullptr, nullptr,
                                  0, 0, 20, &c, &error),
            kInvalidArgument);
  Take(error);

  LlmConstrainCompiler* compiler = nullptr;
  const int64_t decreasing[] = {0, 2, 1};
  EXPECT_EQ(llm_constrain_compiler_create("abc", decreasing, 2, nullptr, 0, nullptr, 0, 0,
                                          &compiler, &error),
            kInvalidArgument);
  EXPECT_THAT(Take(error), HasSubstr("offsets decrease at 2"));
  const int64_t offsets[] = {0, 1, 2};
  const int32_t end = 7;  // out of range
  EXPECT_EQ(
      llm_constrain_compiler_create("ab", offsets, 2, &end, 1, nullptr, 0, 0, &compiler, &error),
      kInvalidArgument);
  EXPECT_FALSE(Take(error).empty());
  EXPECT_EQ(compiler, nullptr);

  LlmConstrainMatcher* m = Matcher(LLM_CONSTRAIN_JSON_OBJECT, "");
  uint32_t word = 0;
  EXPECT_EQ(llm_constrain_matcher_fill_mask(m, &word, 1, &error), kInvalidArgument);
  EXPECT_THAT(Take(error), HasSubstr("mask of 1 words"));
  EXPECT_EQ(llm_constrain_matcher_accept(m, -1), 0);
  EXPECT_EQ(llm_constrain_matcher_accept(m, vocab_.size), 0);
  EXPECT_EQ(llm_constrain_matcher_accept(nullptr, 'a'), 0);
  // A null error pointer is fine: the code alone.
  EXPECT_EQ(llm_constrain_matcher_rollback(m, 1, nullptr), kInvalidArgument);
  llm_constrain_compiler_free(nullptr);
  llm_constrain_constraint_free(nullptr);
  llm_constrain_matcher_free(nullptr);
}

// The wire mask is the mask, in the cheapest encoding, in every state of a
// generation.
TEST_F(CApiTest, WireMaskIsTheMaskInTheCheapestEncoding) {
  const std::string text = R"({"name": "abc", "age": 12})";
  LlmConstrainMatcher* m = Matcher(LLM_CONSTRAIN_JSON_SCHEMA,
                                   R"({"type": "object", "properties": {"name": {"type": "string"},
                                       "age": {"type": "integer"}}, "required": ["name"]})");
  ASSERT_NE(m, nullptr);
  std::set<int32_t> encodings;
  for (int32_t token : Tokenize(vocab_, text)) {
    const std::vector<uint32_t> words = Mask(m);
    TokenMask want = TokenMask::AllowNone(vocab_.size);
    for (int32_t id = 0; id < vocab_.size; ++id) {
      if (Allowed(words, id)) want.Allow(id);
    }
    int32_t encoding = -1;
    const void* data = nullptr;
    int64_t size = -1;
    char* error = nullptr;
    ASSERT_EQ(llm_constrain_matcher_wire_mask(m, &encoding, &data, &size, &error), 0)
        << Take(error);
    encodings.insert(encoding);
    EXPECT_EQ(encoding, static_cast<int32_t>(CheapestTokenMaskEncoding(want)));
    TokenMask got;
    std::vector<uint32_t> ids;
    if (encoding == LLM_CONSTRAIN_MASK_BITSET) {
      ASSERT_EQ(size, (vocab_.size + 7) / 8);
      got = *TokenMask::FromBitset(
          std::string_view(static_cast<const char*>(data), static_cast<size_t>(size)), vocab_.size,
          "mask");
    } else {
      const auto* p = static_cast<const uint32_t*>(data);
      ids.assign(p, p + size);
      got = encoding == LLM_CONSTRAIN_MASK_ALLOWED
                ? *TokenMask::FromAllowed(ids, vocab_.size, "mask")
                : *TokenMask::FromDisallowed(ids, vocab_.size, "mask");
    }
    EXPECT_EQ(got, want) << "before token " << token;
    ASSERT_EQ(llm_constrain_matcher_accept(m, token), 1) << token;
  }
  EXPECT_EQ(llm_constrain_matcher_can_end(m), 1);
  // The small vocabulary's bitset is 38 bytes: a few allowed tokens are a
  // list, most a bitset.
  EXPECT_GE(encodings.size(), 2u);
}

}  // namespace
}  // namespace llm::constrain
