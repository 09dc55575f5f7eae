#include "client/generate/detokenizer.h"

#include <limits>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace llm::client {
namespace {

// A vocabulary where "é" (C3 A9) and "😀" (F0 9F 98 80) are split over tokens.
const std::map<int32_t, std::string>& Vocab() {
  static const auto* v = new std::map<int32_t, std::string>{
      {0, "caf"},  {1, "\xC3"}, {2, "\xA9"}, {3, " "}, {4, "\xF0\x9F"},
      {5, "\x98"}, {6, "\x80"}, {7, "\xFF"}, {8, "ok"}};
  return *v;
}

TokenBytesCache::Fetch Fetcher(int* calls) {
  return [calls](int32_t id) -> absl::StatusOr<std::string> {
    ++*calls;
    auto it = Vocab().find(id);
    if (it == Vocab().end()) return absl::InvalidArgumentError("no such token");
    return it->second;
  };
}

TEST(DetokenizerTest, HoldsSplitCharactersUntilComplete) {
  int calls = 0;
  TokenBytesCache cache(Fetcher(&calls));
  Detokenizer d(cache);
  std::string out;
  for (int32_t id : {0, 1}) out += *d.Add(id);
  EXPECT_EQ(out, "caf");
  EXPECT_EQ(*d.Add(2), "\xC3\xA9");
  EXPECT_EQ(*d.Add(3), " ");
  EXPECT_EQ(*d.Add(4), "");
  EXPECT_EQ(*d.Add(5), "");
  EXPECT_EQ(*d.Add(6), "\xF0\x9F\x98\x80");
  EXPECT_EQ(d.Flush(), "");
}

TEST(DetokenizerTest, FetchesEachTokenOnce) {
  int calls = 0;
  TokenBytesCache cache(Fetcher(&calls));
  for (int round = 0; round < 3; ++round) {
    Detokenizer d(cache);
    for (int32_t id : {0, 1, 2, 0, 1, 2}) ASSERT_TRUE(d.Add(id).ok());
  }
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(cache.fetches(), 3);
}

TEST(DetokenizerTest, InvalidBytesBecomeReplacementCharacters) {
  int calls = 0;
  TokenBytesCache cache(Fetcher(&calls));
  Detokenizer d(cache);
  EXPECT_EQ(*d.Add(7), "\xEF\xBF\xBD");  // never valid: released at once
  EXPECT_EQ(*d.Add(1), "");
  EXPECT_EQ(*d.Add(8), "\xEF\xBF\xBDok");  // the started character never completed
  EXPECT_EQ(*d.Add(4), "");
  EXPECT_EQ(d.Flush(), "\xEF\xBF\xBD");  // end of stream inside a character
}

TEST(DetokenizerTest, ErrorsAreNotCachedAndChangeNothing) {
  int calls = 0;
  TokenBytesCache cache(Fetcher(&calls));
  Detokenizer d(cache);
  EXPECT_EQ(*d.Add(1), "");
  EXPECT_FALSE(d.Add(99).ok());
  EXPECT_FALSE(d.Add(99).ok());
  EXPECT_EQ(calls, 3);
  EXPECT_FALSE(d.Add(-1).ok());
  EXPECT_EQ(*d.Add(2), "\xC3\xA9");  // the held byte survived the errors
}

TEST(DetokenizerTest, PreloadedTokensAreNeverFetched) {
  int calls = 0;
  TokenBytesCache cache(Fetcher(&calls));
  std::vector<std::string> all;
  for (const auto& [id, bytes] : Vocab()) all.push_back(bytes);  // ids 0..8
  ASSERT_TRUE(cache.Preload(0, all).ok());
  EXPECT_EQ(cache.preloaded(), 9);
  Detokenizer d(cache);
  std::string out;
  for (int32_t id : {0, 1, 2, 3, 4, 5, 6, 3, 8}) out += *d.Add(id);
  EXPECT_EQ(out, "caf\xC3\xA9 \xF0\x9F\x98\x80 ok");
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(cache.fetches(), 0);
  // An id past the preloaded ones is fetched as before.
  EXPECT_FALSE(d.Add(9).ok());
  EXPECT_EQ(cache.fetches(), 1);
}

TEST(DetokenizerTest, PreloadAnywhereAndOverwrite) {
  int calls = 0;
  TokenBytesCache cache(Fetcher(&calls));
  std::vector<std::string> tail = {"x", "y"};
  ASSERT_TRUE(cache.Preload(100, tail).ok());
  EXPECT_EQ(*cache.Get(100), "x");
  EXPECT_EQ(*cache.Get(101), "y");
  EXPECT_EQ(*cache.Get(8), "ok");  // below them: still fetched
  EXPECT_EQ(calls, 1);
  std::vector<std::string> again = {"ok!"};
  ASSERT_TRUE(cache.Preload(8, again).ok());
  EXPECT_EQ(*cache.Get(8), "ok!");
  ASSERT_TRUE(cache.Preload(3, {}).ok());
  EXPECT_EQ(cache.preloaded(), 3);
  EXPECT_EQ(calls, 1);
}

TEST(DetokenizerTest, PreloadRejectsBadRanges) {
  int calls = 0;
  TokenBytesCache cache(Fetcher(&calls));
  std::vector<std::string> two = {"a", "b"};
  EXPECT_EQ(cache.Preload(-1, two).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cache.Preload(std::numeric_limits<int32_t>::max(), two).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(two[0], "a");  // nothing moved
  EXPECT_EQ(cache.preloaded(), 0);
}

}  // namespace
}  // namespace llm::client
