// The merge loop against a deliberately naive reference (tiktoken's algorithm
// on byte strings and a map), for both rank rules and all four code paths
// (the O(n^2) scan, the heap path with FlatHeap or MergeQueue, and the long
// pieces' 8-byte parts), and the two queues against std::priority_queue.
#include "tokenizer_svc/bpe.h"

#include <gtest/gtest.h>

#include <map>
#include <queue>
#include <random>
#include <string>
#include <vector>

namespace llm::tok {
namespace {

struct RandomVocab {
  std::vector<std::string> tokens;        // id -> bytes
  std::map<std::string, uint32_t> id_of;  // bytes -> id
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

enum class Path { kScan, kFlatHeap, kMergeQueue, kLongParts };

// One code path, whatever the piece's length; each path is checked against
// the reference and emits every byte exactly once.
std::vector<uint32_t> RunMerge(const BpeModel& model, const std::string& s, Path path) {
  std::vector<uint32_t> out;
  BpeScratch scratch;
  uint32_t covered = 0;
  auto emit = [&](uint32_t id, uint32_t begin, uint32_t end) {
    EXPECT_EQ(begin, covered);
    EXPECT_LT(begin, end);
    covered = end;
    out.push_back(id);
  };
  switch (path) {
    case Path::kScan:
      bpe_internal::ScanMerge(model, s, emit);
      break;
    case Path::kFlatHeap:
      bpe_internal::HeapMerge(model, s, scratch, scratch.heap, emit);
      break;
    case Path::kMergeQueue:
      bpe_internal::HeapMerge(model, s, scratch, scratch.queue, emit);
      break;
    case Path::kLongParts:
      EXPECT_TRUE(bpe_internal::LongMerge(model, s, scratch, emit));
      break;
  }
  EXPECT_EQ(covered, s.size());
  return out;
}

TEST(FlatHeapTest, PopsInRankThenIndexOrder) {
  std::mt19937 rng(9);
  FlatHeap h;
  std::priority_queue<std::pair<uint32_t, uint32_t>, std::vector<std::pair<uint32_t, uint32_t>>,
                      std::greater<>>
      want;
  for (int step = 0; step < 20000; ++step) {
    if (want.empty() || rng() % 3 != 0) {
      const uint32_t rank = rng() % 1000;
      const uint32_t index = rng();
      h.Push(rank, index);
      want.emplace(rank, index);
    } else {
      ASSERT_EQ(h.Pop(), want.top());
      want.pop();
    }
  }
  while (!want.empty()) {
    ASSERT_EQ(h.Pop(), want.top());
    want.pop();
  }
  EXPECT_TRUE(h.empty());
}

TEST(BpeTest, EveryPathEqualsTheReferenceOnRandomVocabularies) {
  std::mt19937 rng(42);
  for (uint32_t seed = 0; seed < 8; ++seed) {
    const RandomVocab v = MakeVocab(seed, 300);
    const auto m = BuildModels(v);
    for (int trial = 0; trial < 200; ++trial) {
      std::string s(1 + rng() % (trial < 150 ? 40 : trial < 190 ? 600 : 3000), 'a');
      // Random letters, or (one trial in five) long runs of one letter, where
      // the heap path's queue keeps sorted runs per rank.
      const bool runs = trial % 5 == 4;
      for (size_t i = 0; i < s.size(); ++i) {
        s[i] = runs && i > 0 && rng() % 16 != 0 ? s[i - 1] : static_cast<char>('a' + rng() % 4);
      }
      // The scan works on stack arrays and only takes short pieces.
      const bool scan = s.size() < kBpeHeapThreshold;
      const auto concat = ReferenceConcat(v, s);
      const auto listed = ReferenceMergeList(v, s);
      for (const Path path : {Path::kScan, Path::kFlatHeap, Path::kMergeQueue, Path::kLongParts}) {
        if (path == Path::kScan && !scan) continue;
        ASSERT_EQ(RunMerge(m->concat, s, path), concat) << s;
        ASSERT_EQ(RunMerge(m->concat_table, s, path), concat) << s;
        ASSERT_EQ(RunMerge(m->merge_list, s, path), listed) << s;
      }
    }
  }
}

TEST(MergeQueueTest, PopsInRankThenIndexOrderLikeAHeap) {
  std::mt19937 rng(7);
  MergeQueue q;
  for (int round = 0; round < 50; ++round) {
    q.Clear();  // reuse across rounds, as the scratch does across pieces
    std::priority_queue<std::pair<uint32_t, uint32_t>, std::vector<std::pair<uint32_t, uint32_t>>,
                        std::greater<>>
        want;
    // Few ranks and mostly increasing indices (the runs), some out of order
    // (the overflow heaps); pops interleaved with pushes.
    const uint32_t ranks = 1 + rng() % (round % 2 == 0 ? 3 : 200);
    uint32_t next_index = 0;
    for (int step = 0; step < 2000; ++step) {
      if (want.empty() || rng() % 3 != 0) {
        const uint32_t rank = rng() % ranks;
        const uint32_t index = rng() % 4 == 0 ? rng() % (next_index + 1) : next_index++;
        q.Push(rank, index);
        want.emplace(rank, index);
      } else {
        ASSERT_FALSE(q.empty());
        ASSERT_EQ(q.Pop(), want.top());
        want.pop();
      }
    }
    while (!want.empty()) {
      ASSERT_FALSE(q.empty());
      ASSERT_EQ(q.Pop(), want.top());
      want.pop();
    }
    EXPECT_TRUE(q.empty());
  }
}

// 'a' x 2^k for k = 0..17: a run of 2^17 letters merges into one part of
// 131,072 bytes, more than a LongPart holds (255), so the long path gives up
// and BytePairEncode takes the 16-byte parts; the result is still the one
// token.
TEST(BpeTest, PartsLongerThanLongPartFallBackToTheHeapPath) {
  Trie trie;
  for (int k = 0; k <= 17; ++k) trie.Insert(std::string(size_t{1} << k, 'a'), k);
  trie.Freeze();
  BpeModel model;
  model.trie = &trie;
  model.byte_ids.fill(Trie::kNoValue);
  model.byte_ids['a'] = 0;
  BpeScratch scratch;
  const std::string s(size_t{1} << 17, 'a');
  auto fail = [](uint32_t, uint32_t, uint32_t) { ADD_FAILURE() << "emitted"; };
  EXPECT_FALSE(bpe_internal::LongMerge(model, s, scratch, fail));
  std::vector<uint32_t> ids;
  BytePairEncode(model, s, scratch, [&](uint32_t id, uint32_t, uint32_t) { ids.push_back(id); });
  EXPECT_EQ(ids, std::vector<uint32_t>{17});
  // 255 letters end as 8 parts of at most 128 bytes, which it keeps.
  const std::string t(255, 'a');
  std::vector<uint32_t> long_ids;
  auto long_emit = [&](uint32_t id, uint32_t, uint32_t) { long_ids.push_back(id); };
  EXPECT_TRUE(bpe_internal::LongMerge(model, t, scratch, long_emit));
  std::vector<uint32_t> heap_ids;
  auto heap_emit = [&](uint32_t id, uint32_t, uint32_t) { heap_ids.push_back(id); };
  bpe_internal::HeapMerge(model, t, scratch, scratch.queue, heap_emit);
  EXPECT_EQ(long_ids, heap_ids);
  EXPECT_EQ(long_ids.size(), 8u);
  // 256 letters: one part of 256 bytes, too long.
  EXPECT_FALSE(bpe_internal::LongMerge(model, std::string(256, 'a'), scratch, fail));
}

TEST(BpeTest, MissingBytesComeOutAsNoValueParts) {
  const RandomVocab v = MakeVocab(3, 50);
  const auto m = BuildModels(v);
  for (const BpeModel* model : {&m->concat, &m->concat_table}) {
    std::vector<std::pair<uint32_t, std::string>> parts;
    BpeScratch scratch;
    const std::string s =
        "ab\xFF"
        "cd";
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
