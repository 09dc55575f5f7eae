#include "tokenizer_svc/trie.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>

namespace llm::tok {
namespace {

// The seed's example: "a", "ab", "abc", "b".
Trie SeedTrie() {
  Trie t;
  EXPECT_TRUE(t.Insert("a", 0));
  EXPECT_TRUE(t.Insert("ab", 1));
  EXPECT_TRUE(t.Insert("abc", 2));
  EXPECT_TRUE(t.Insert("b", 3));
  t.Freeze();
  return t;
}

TEST(TrieTest, SeedExampleExactLookups) {
  const Trie t = SeedTrie();
  EXPECT_EQ(t.Find("a"), 0u);
  EXPECT_EQ(t.Find("ab"), 1u);
  EXPECT_EQ(t.Find("abc"), 2u);
  EXPECT_EQ(t.Find("b"), 3u);
  EXPECT_EQ(t.Find("bc"), Trie::kNoValue);
  EXPECT_EQ(t.Find("abcd"), Trie::kNoValue);
  EXPECT_EQ(t.Find(""), Trie::kNoValue);
  EXPECT_EQ(t.num_keys(), 4u);
  // root -> a -> b -> c, root -> b: 5 nodes with the root.
  EXPECT_EQ(t.num_nodes(), 5u);
}

TEST(TrieTest, LongestPrefixIsTheSeedsMatch) {
  const Trie t = SeedTrie();
  EXPECT_EQ(t.LongestPrefix("abcb"), std::make_pair(size_t{3}, 2u));
  EXPECT_EQ(t.LongestPrefix("abd"), std::make_pair(size_t{2}, 1u));
  EXPECT_EQ(t.LongestPrefix("ba"), std::make_pair(size_t{1}, 3u));
  EXPECT_EQ(t.LongestPrefix("c"), std::make_pair(size_t{0}, Trie::kNoValue));
}

TEST(TrieTest, WalkExtendsANodeLikeTheMergeLoop) {
  const Trie t = SeedTrie();
  const uint32_t a = t.Child(Trie::kRoot, 'a');
  EXPECT_EQ(t.Value(t.Walk(a, "bc")), 2u);
  EXPECT_EQ(t.Walk(a, "x"), Trie::kNoNode);
  EXPECT_EQ(t.Value(Trie::kNoNode), Trie::kNoValue);
}

TEST(TrieTest, RejectsDuplicatesAndEmptyKeys) {
  Trie t;
  EXPECT_TRUE(t.Insert("x", 1));
  EXPECT_FALSE(t.Insert("x", 2));
  EXPECT_FALSE(t.Insert("", 3));
  t.Freeze();
  EXPECT_EQ(t.Find("x"), 1u);
  EXPECT_FALSE(t.Insert("y", 4));  // frozen
}

TEST(TrieTest, MatchesAMapOnRandomBinaryKeys) {
  std::mt19937 rng(1);
  std::map<std::string, uint32_t> reference;
  Trie t;
  for (uint32_t i = 0; i < 5000; ++i) {
    std::string key(1 + rng() % 6, '\0');
    for (char& c : key) c = static_cast<char>(rng() % 6 == 0 ? rng() % 256 : 'a' + rng() % 3);
    if (reference.emplace(key, i).second) {
      EXPECT_TRUE(t.Insert(key, i));
    } else {
      EXPECT_FALSE(t.Insert(key, i));
    }
  }
  t.Freeze();
  for (const auto& [key, value] : reference) ASSERT_EQ(t.Find(key), value) << key;
  for (int i = 0; i < 5000; ++i) {
    std::string probe(1 + rng() % 7, '\0');
    for (char& c : probe) c = static_cast<char>('a' + rng() % 3);
    auto it = reference.find(probe);
    ASSERT_EQ(t.Find(probe), it == reference.end() ? Trie::kNoValue : it->second);
    // Longest prefix against a brute-force scan.
    std::pair<size_t, uint32_t> best{0, Trie::kNoValue};
    for (size_t len = 1; len <= probe.size(); ++len) {
      auto p = reference.find(probe.substr(0, len));
      if (p != reference.end()) best = {len, p->second};
    }
    ASSERT_EQ(t.LongestPrefix(probe), best);
  }
}

}  // namespace
}  // namespace llm::tok
