// The token index against a trie of the same tokens: Find(bytes) ==
// trie.Find(bytes) for every token, duplicates, non-tokens near tokens
// (prefixes, extensions, one byte changed) and random strings.
#include "tokenizer_svc/token_index.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "common/test_paths.h"
#include "tokenizer_svc/testing/token_tables.h"

namespace llm::tok {
namespace {

using testing::AllIds;
using testing::MakeTrie;

TEST(TokenIndexTest, SmallExample) {
  // Id 3 duplicates id 1; id 4 is a hole; id 5 is longer than the inline bytes.
  const std::string long_token(TokenIndex::kInlineBytes + 5, 'z');
  const std::vector<std::string> tokens = {"a", "ab", "abc", "ab", "", long_token};
  const Trie trie = MakeTrie(tokens);
  const TokenIndex t = TokenIndex::Build(tokens, AllIds(tokens));
  EXPECT_EQ(t.size(), 4u);
  EXPECT_EQ(t.Find("a"), 0u);
  EXPECT_EQ(t.Find("ab"), 1u);
  EXPECT_EQ(t.Find("abc"), 2u);
  EXPECT_EQ(t.Find(long_token), 5u);
  EXPECT_EQ(t.Find(long_token.substr(1)), Trie::kNoValue);
  EXPECT_EQ(t.Find(long_token + "z"), Trie::kNoValue);
  EXPECT_EQ(t.Find(""), Trie::kNoValue);
  EXPECT_EQ(t.Find("b"), Trie::kNoValue);
  EXPECT_EQ(t.Find("abcd"), Trie::kNoValue);
  EXPECT_EQ(t.Find(std::string(300, 'a')), Trie::kNoValue);
  // The ids entered: each maps back to itself; the duplicate and the hole do not.
  std::vector<uint32_t> canonical;
  TokenIndex::Build(tokens, AllIds(tokens), &canonical);
  EXPECT_EQ(canonical, (std::vector<uint32_t>{0, 1, 2, 5}));
  // Only the ids given take part.
  const std::vector<uint32_t> some = {2, 3};
  const TokenIndex u = TokenIndex::Build(tokens, some, &canonical);
  EXPECT_EQ(u.size(), 2u);
  EXPECT_EQ(u.Find("ab"), 3u);
  EXPECT_EQ(u.Find("a"), Trie::kNoValue);
  EXPECT_EQ(canonical, some);
}

TEST(TokenIndexTest, TooLongTokensGiveAnEmptyIndex) {
  const std::vector<std::string> tokens = {"a", std::string(TokenIndex::kMaxTokenBytes + 1, 'a')};
  const Trie trie = MakeTrie(tokens);
  const TokenIndex t = TokenIndex::Build(tokens, AllIds(tokens));
  EXPECT_TRUE(t.empty());
  EXPECT_EQ(t.Find("a"), Trie::kNoValue);
}

class RealVocabIndex : public ::testing::TestWithParam<std::string> {};

TEST_P(RealVocabIndex, AgreesWithTheTrie) {
  const std::string path = llm::testing::SharedDir() + "/tokenizer/" + GetParam() + ".tiktoken";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "missing " << path;
  absl::StatusOr<std::vector<std::string>> loaded = testing::NormalTokens(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const std::vector<std::string>& tokens = *loaded;
  const Trie trie = MakeTrie(tokens);
  const TokenIndex t = TokenIndex::Build(tokens, AllIds(tokens));
  ASSERT_FALSE(t.empty());
  std::mt19937 rng(3);
  size_t found = 0;
  for (const std::string& s : tokens) {
    if (s.empty()) continue;
    ASSERT_EQ(t.Find(s), trie.Find(s)) << s;
    found += t.Find(s) != Trie::kNoValue;
    // Near misses: a prefix, an extension, one byte changed.
    const std::string prefix = s.substr(0, s.size() - 1);
    ASSERT_EQ(t.Find(prefix), trie.Find(prefix));
    const std::string longer = s + static_cast<char>(rng());
    ASSERT_EQ(t.Find(longer), trie.Find(longer));
    std::string changed = s;
    changed[rng() % changed.size()] ^= static_cast<char>(1 + rng() % 255);
    ASSERT_EQ(t.Find(changed), trie.Find(changed));
  }
  EXPECT_EQ(found, t.size());
  for (int i = 0; i < 200'000; ++i) {
    std::string s(1 + rng() % 6, ' ');
    for (char& c : s) c = static_cast<char>(i % 2 == 0 ? 'a' + rng() % 26 : rng());
    ASSERT_EQ(t.Find(s), trie.Find(s)) << s;
  }
}

INSTANTIATE_TEST_SUITE_P(Tiktoken, RealVocabIndex, ::testing::Values("cl100k_base", "o200k_base"));

}  // namespace
}  // namespace llm::tok
