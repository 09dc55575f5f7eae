// The merge loop against a deliberately naive reference (tiktoken's algorithm
// on byte strings and a map), for both rank rules and both code paths (the
// O(n^2) scan and the O(n log n) heap).
#include "tokenizer_svc/bpe.h"

#include <map>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace llm::tok {
namespace {

struct RandomVocab {
  std::vector<std::string> tokens;          // id -> bytes
  std::map<std::string, uint32_t> id_of;    // bytes -> id
  std::map<std::pair<uint32_t, uint32_t>, Merge> merges;
};

// Bytes 'a'..'d' are ids 0..3; every further token joins two earlier ones.
RandomVocab MakeVocab(uint32_t seed, int n_merges) {
  std::mt19937 rng(seed);
  RandomVocab v;
  for (char c = 'a'; c <= 'd'; ++c) {
    v.id_of[std::string(1, c)] = static_cast<uint32_t>(v.tokens.size());
    v.tokens.emplace_back(1, c);
  }
  for (int i = 0; i < n_merges; ++i) {
    const auto l = static_cast<uint32_t>(rng() % v.tokens.size());
    const auto r = static_cast<uint32_t>(rng() % v.tokens.size());
    const std::string joined = v.tokens[l] + v.tokens[r];
    if (joined.size() > 12) continue;
    auto [it, fresh] = v.id_of.emplace(joined, static_cast<uint32_t>(v.tokens.size()));
    if (fresh) v.tokens.push_back(joined);
    v.merges.emplace(std::make_pair(l, r), Merge{static_cast<uint32_t>(i), it->second});
  }
  return v;
}

// tiktoken: merge the leftmost adjacent pair whose concatenation has the
// lowest rank (= id).
std::vector<uint32_t> ReferenceConcat(const RandomVocab& v, const std::string& s) {
  std::vector<std::string> parts;
  for (char c : s) parts.emplace_back(1, c);
  for (;;) {
    uint32_t best = kNoRank;
    size_t at = 0;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      auto it = v.id_of.find(parts[i] + parts[i + 1]);
      if (it != v.id_of.end() && it->second < best) {
        best = it->second;
        at = i;
      }
    }
    if (best == kNoRank) break;
    parts[at] += parts[at + 1];
    parts.erase(parts.begin() + static_cast<ptrdiff_t>(at) + 1);
  }
  std::vector<uint32_t> ids;
  for (const auto& p : parts) ids.push_back(v.id_of.at(p));
  return ids;
}

// Hugging Face: merge the leftmost listed pair of lowest merge rank.
std::vector<uint32_t> ReferenceMergeList(const RandomVocab& v, const std::string& s) {
  std::vector<uint32_t> parts;
  for (char c : s) parts.push_back(v.id_of.at(std::string(1, c)));
  for (;;) {
    uint32_t best = kNoRank;
    size_t at = 0;
    uint32_t result = 0;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      auto it = v.merges.find({parts[i], parts[i + 1]});
      if (it != v.merges.end() && it->second.rank < best) {
        best = it->second.rank;
        at = i;
        result = it->second.result;
      }
    }
    if (best == kNoRank) break;
    parts[at] = result;
    parts.erase(parts.begin() + static_cast<ptrdiff_t>(at) + 1);
  }
  return parts;
}

struct Models {
  Trie trie;
  PairTable pairs;
  absl::flat_hash_map<uint64_t, Merge> merge_map;
  BpeModel concat;        // pairs looked up in the trie
  BpeModel concat_table;  // pairs looked up in the PairTable
  BpeModel merge_list;
};

std::unique_ptr<Models> BuildModels(const RandomVocab& v) {
  auto m = std::make_unique<Models>();
  for (uint32_t id = 0; id < v.tokens.size(); ++id) m->trie.Insert(v.tokens[id], id);
  m->trie.Freeze();
  m->pairs = PairTable::Build(m->trie, v.tokens);
  for (const auto& [pair, merge] : v.merges) {
    m->merge_map.emplace(PairKey(pair.first, pair.second), merge);
  }
  m->concat.trie = &m->trie;
  m->concat_table.trie = &m->trie;
  m->concat_table.pairs = &m->pairs;
  m->merge_list.trie = &m->trie;
  m->merge_list.merges = &m->merge_map;
  for (int b = 0; b < 256; ++b) {
    const uint32_t id = m->trie.Find(std::string(1, static_cast<char>(b)));
    m->concat.byte_ids[b] = id;
    m->concat_table.byte_ids[b] = id;
    m->merge_list.byte_ids[b] = id;
  }
  return m;
}

template <bool kHeap>
std::vector<uint32_t> RunMerge(const BpeModel& model, const std::string& s) {
  std::vector<uint32_t> out;
  BpeScratch scratch;
  auto emit = [&](uint32_t id, uint32_t, uint32_t) { out.push_back(id); };
  if constexpr (kHeap) {
    bpe_internal::HeapMerge(model, s, scratch, emit);
  } else {
    bpe_internal::ScanMerge(model, s, emit);
  }
  return out;
}

TEST(BpeTest, BothPathsEqualTheReferenceOnRandomVocabularies) {
  std::mt19937 rng(42);
  for (uint32_t seed = 0; seed < 8; ++seed) {
    const RandomVocab v = MakeVocab(seed, 300);
    const auto m = BuildModels(v);
    for (int trial = 0; trial < 200; ++trial) {
      std::string s(1 + rng() % (trial < 150 ? 40 : 600), 'a');
      for (char& c : s) c = static_cast<char>('a' + rng() % 4);
      // The scan works on stack arrays and only takes short pieces.
      const bool scan = s.size() < kBpeHeapThreshold;
      const auto concat = ReferenceConcat(v, s);
      if (scan) {
        ASSERT_EQ(RunMerge<false>(m->concat, s), concat) << s;
      }
      ASSERT_EQ(RunMerge<true>(m->concat, s), concat) << s;
      if (scan) {
        ASSERT_EQ(RunMerge<false>(m->concat_table, s), concat) << s;
      }
      ASSERT_EQ(RunMerge<true>(m->concat_table, s), concat) << s;
      const auto listed = ReferenceMergeList(v, s);
      if (scan) {
        ASSERT_EQ(RunMerge<false>(m->merge_list, s), listed) << s;
      }
      ASSERT_EQ(RunMerge<true>(m->merge_list, s), listed) << s;
    }
  }
}

TEST(BpeTest, MissingBytesComeOutAsNoValueParts) {
  const RandomVocab v = MakeVocab(3, 50);
  const auto m = BuildModels(v);
  for (const BpeModel* model : {&m->concat, &m->concat_table}) {
    std::vector<std::pair<uint32_t, std::string>> parts;
    BpeScratch scratch;
    const std::string s = "ab\xFF" "cd";
    BytePairEncode(*model, s, scratch, [&](uint32_t id, uint32_t b, uint32_t e) {
      parts.emplace_back(id, s.substr(b, e - b));
    });
    std::string joined;
    bool saw_missing = false;
    for (const auto& [id, bytes] : parts) {
      joined += bytes;
      if (bytes == "\xFF") {
        saw_missing = true;
        EXPECT_EQ(id, Trie::kNoValue);
      }
    }
    EXPECT_EQ(joined, s);
    EXPECT_TRUE(saw_missing);
  }
}

// A token may start with a byte that is not a token itself ("\xFF" is not,
// "\xFFa" is): the pair table cannot hold that pair, the trie must find it.
TEST(BpeTest, TokenStartingWithAMissingByteStillMerges) {
  RandomVocab v = MakeVocab(5, 50);
  const std::string ff_a = std::string(1, '\xFF') + "a";
  v.tokens.push_back(ff_a);
  const auto m = BuildModels(v);
  const auto want_id = static_cast<uint32_t>(v.tokens.size() - 1);
  for (const BpeModel* model : {&m->concat, &m->concat_table}) {
    for (const std::string& s : {ff_a, std::string(200, 'b') + ff_a}) {
      std::vector<uint32_t> ids;
      BpeScratch scratch;
      BytePairEncode(*model, s, scratch,
                     [&](uint32_t id, uint32_t, uint32_t) { ids.push_back(id); });
      ASSERT_FALSE(ids.empty());
      EXPECT_EQ(ids.back(), want_id) << s.size();
    }
  }
}

}  // namespace
}  // namespace llm::tok
