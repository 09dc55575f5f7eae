// The pair table against the trie it is built from: for every pair of tokens
// (exhaustively on small vocabularies, every split of every token and random
// pairs on the real ones) Find(l, r) == trie.Find(bytes(l) + bytes(r)); and
// the table built from the token index equals the one built from the trie.
#include "tokenizer_svc/pair_table.h"

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

// The table from the token index, as Tokenizer::Create builds it.
PairTable FromIndex(const std::vector<std::string>& tokens) {
  std::vector<uint32_t> canonical;
  const TokenIndex index = TokenIndex::Build(tokens, AllIds(tokens), &canonical);
  return PairTable::Build(index, tokens, canonical);
}

// Both builds of the table agree on every pair of `ids` and every byte pair.
void ExpectSameTables(const PairTable& a, const PairTable& b, const std::vector<uint32_t>& ids) {
  ASSERT_EQ(a.size(), b.size());
  ASSERT_EQ(a.empty(), b.empty());
  for (const uint32_t l : ids) {
    for (const uint32_t r : ids) ASSERT_EQ(a.Find(l, r), b.Find(l, r)) << l << " " << r;
  }
  if (a.empty()) return;
  for (int x = 0; x < 256; ++x) {
    for (int y = 0; y < 256; ++y) {
      ASSERT_EQ(a.FindBytes(static_cast<uint8_t>(x), static_cast<uint8_t>(y)),
                b.FindBytes(static_cast<uint8_t>(x), static_cast<uint8_t>(y)));
    }
  }
}

TEST(PairTableTest, SmallExample) {
  const std::vector<std::string> tokens = {"a", "b", "ab", "abb", "bb", "c"};
  const Trie trie = MakeTrie(tokens);
  const PairTable t = PairTable::Build(trie, tokens);
  ExpectSameTables(t, FromIndex(tokens), AllIds(tokens));
  // Pairs: (a,b)->ab, (ab,b)->abb, (a,bb)->abb, (b,b)->bb.
  EXPECT_EQ(t.size(), 4u);
  EXPECT_EQ(t.Find(0, 1), 2u);
  EXPECT_EQ(t.Find(2, 1), 3u);
  EXPECT_EQ(t.Find(0, 4), 3u);
  EXPECT_EQ(t.Find(1, 1), 4u);
  EXPECT_EQ(t.Find(1, 0), Trie::kNoValue);
  EXPECT_EQ(t.Find(5, 5), Trie::kNoValue);
  EXPECT_EQ(t.Find(PairTable::kMaxId, 0), Trie::kNoValue);
  EXPECT_EQ(t.Find(Trie::kNoValue, 0), Trie::kNoValue);
  EXPECT_EQ(t.FindBytes('a', 'b'), 2u);
  EXPECT_EQ(t.FindBytes('b', 'b'), 4u);
  EXPECT_EQ(t.FindBytes('b', 'a'), Trie::kNoValue);
  EXPECT_EQ(t.FindBytes('a', 'a'), Trie::kNoValue);
  EXPECT_EQ(t.FindBytes('c', 0), Trie::kNoValue);
  // Prefetch only hints; it never reads past the table.
  t.Prefetch(0, 1);
  t.Prefetch(PairTable::kMaxId, 0);
}

TEST(PairTableTest, BytePairsWhoseBytesAreNotTokens) {
  // "\xFF" alone is no token, "\xFFa" is: FindBytes sees it, Find cannot.
  const std::vector<std::string> tokens = {"a", "b", "ab", std::string("\xFF") + "a"};
  const Trie trie = MakeTrie(tokens);
  const PairTable t = PairTable::Build(trie, tokens);
  ExpectSameTables(t, FromIndex(tokens), AllIds(tokens));
  EXPECT_EQ(t.FindBytes(0xFF, 'a'), 3u);
  EXPECT_EQ(t.FindBytes('a', 0xFF), Trie::kNoValue);
  EXPECT_EQ(t.FindBytes('a', 'b'), 2u);
}

TEST(PairTableTest, DuplicatesMapToTheLowestId) {
  // "ab" twice (ids 2 and 3): the trie keeps 2, and so does the table.
  const std::vector<std::string> tokens = {"a", "b", "ab", "ab", "", "abab"};
  const Trie trie = MakeTrie(tokens);
  const PairTable t = PairTable::Build(trie, tokens);
  ExpectSameTables(t, FromIndex(tokens), AllIds(tokens));
  EXPECT_EQ(t.Find(0, 1), 2u);
  EXPECT_EQ(t.Find(2, 2), 5u);
  EXPECT_EQ(t.Find(3, 3), Trie::kNoValue);  // 3 is never a part's id
}

TEST(PairTableTest, IdsTooLargeGiveAnEmptyTable) {
  std::vector<std::string> tokens(PairTable::kMaxId + 1);
  tokens[0] = "a";
  tokens[1] = "b";
  tokens[PairTable::kMaxId] = "ab";
  const Trie trie = MakeTrie(tokens);
  const PairTable t = PairTable::Build(trie, tokens);
  EXPECT_TRUE(t.empty());
  EXPECT_EQ(t.Find(0, 1), Trie::kNoValue);
  EXPECT_TRUE(FromIndex(tokens).empty());
  EXPECT_TRUE(PairTable::Build(TokenIndex(), tokens, AllIds(tokens)).empty());
}

TEST(PairTableTest, EveryPairAgreesWithTheTrieOnRandomVocabularies) {
  std::mt19937 rng(11);
  for (int round = 0; round < 4; ++round) {
    std::vector<std::string> tokens = {"a", "b", "c"};
    while (tokens.size() < 400) {
      std::string s = tokens[rng() % tokens.size()] + tokens[rng() % tokens.size()];
      if (s.size() <= 10) tokens.push_back(std::move(s));  // duplicates included
    }
    const Trie trie = MakeTrie(tokens);
    const PairTable t = PairTable::Build(trie, tokens);
    ExpectSameTables(t, FromIndex(tokens), AllIds(tokens));
    for (uint32_t l = 0; l < tokens.size(); ++l) {
      for (uint32_t r = 0; r < tokens.size(); ++r) {
        if (trie.Find(tokens[l]) != l || trie.Find(tokens[r]) != r) continue;  // not canonical
        ASSERT_EQ(t.Find(l, r), trie.Find(tokens[l] + tokens[r])) << l << " " << r;
      }
    }
  }
}

class RealVocab : public ::testing::TestWithParam<std::string> {};

TEST_P(RealVocab, AgreesWithTheTrie) {
  const std::string path = llm::testing::SharedDir() + "/tokenizer/" + GetParam() + ".tiktoken";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "missing " << path;
  absl::StatusOr<std::vector<std::string>> loaded = testing::NormalTokens(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const std::vector<std::string>& tokens = *loaded;
  const Trie trie = MakeTrie(tokens);
  const PairTable t = PairTable::Build(trie, tokens);
  ASSERT_FALSE(t.empty());
  const PairTable from_index = FromIndex(tokens);
  ASSERT_EQ(from_index.size(), t.size());
  // Complete: every split of every token into two tokens is in the table.
  size_t splits = 0;
  for (uint32_t id = 0; id < tokens.size(); ++id) {
    const std::string& s = tokens[id];
    for (size_t k = 1; k < s.size(); ++k) {
      const uint32_t l = trie.Find(s.substr(0, k));
      const uint32_t r = trie.Find(s.substr(k));
      if (l == Trie::kNoValue || r == Trie::kNoValue) continue;
      ++splits;
      ASSERT_EQ(t.Find(l, r), trie.Find(s)) << id << " at " << k;
      ASSERT_EQ(from_index.Find(l, r), trie.Find(s)) << id << " at " << k;
    }
  }
  EXPECT_EQ(splits, t.size());
  // Every byte pair, against the trie.
  for (int a = 0; a < 256; ++a) {
    for (int b = 0; b < 256; ++b) {
      const std::string two = {static_cast<char>(a), static_cast<char>(b)};
      ASSERT_EQ(t.FindBytes(static_cast<uint8_t>(a), static_cast<uint8_t>(b)), trie.Find(two))
          << a << " " << b;
      ASSERT_EQ(from_index.FindBytes(static_cast<uint8_t>(a), static_cast<uint8_t>(b)),
                trie.Find(two));
    }
  }
  // Sound: random pairs, and pairs with a single byte, agree with the trie.
  std::vector<uint32_t> byte_ids;
  for (int b = 0; b < 256; ++b) byte_ids.push_back(trie.Find(std::string(1, static_cast<char>(b))));
  std::mt19937 rng(5);
  const auto n = static_cast<uint32_t>(tokens.size());
  for (int i = 0; i < 1'000'000; ++i) {
    uint32_t l = rng() % n;
    uint32_t r = i % 2 == 0 ? rng() % n : byte_ids[rng() % 256];
    if (i % 4 == 1) std::swap(l, r);
    if (l >= n || r >= n || tokens[l].empty() || tokens[r].empty()) continue;
    ASSERT_EQ(t.Find(l, r), trie.Find(tokens[l] + tokens[r])) << l << " " << r;
    ASSERT_EQ(from_index.Find(l, r), t.Find(l, r)) << l << " " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Tiktoken, RealVocab, ::testing::Values("cl100k_base", "o200k_base"));

}  // namespace
}  // namespace llm::tok
