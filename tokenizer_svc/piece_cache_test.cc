#include "tokenizer_svc/piece_cache.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace llm::tok {
namespace {

std::vector<uint32_t> Ids(std::span<const uint32_t> s) { return {s.begin(), s.end()}; }

TEST(PieceCacheTest, HitReturnsWhatWasInserted) {
  PieceCache c;
  c.Reset(1);
  EXPECT_TRUE(c.Lookup(" the").empty());
  c.Insert(" the", std::vector<uint32_t>{279});
  EXPECT_EQ(Ids(c.Lookup(" the")), std::vector<uint32_t>{279});
  c.Insert("unbelievable", std::vector<uint32_t>{359, 32898, 481});
  EXPECT_EQ(Ids(c.Lookup("unbelievable")), (std::vector<uint32_t>{359, 32898, 481}));
  // Same prefix or same hash slot never give a false hit: sizes and bytes are compared.
  EXPECT_TRUE(c.Lookup(" th").empty());
  EXPECT_TRUE(c.Lookup(" thE").empty());
}

TEST(PieceCacheTest, LongPiecesHaveTheirOwnTable) {
  PieceCache c;
  c.Reset(1);
  const std::string long_piece(PieceCache::kMaxPieceBytes + 1, 'x');
  const std::vector<uint32_t> ids = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  c.Insert(long_piece, ids);
  EXPECT_EQ(Ids(c.Lookup(long_piece)), ids);
  const std::string longest(PieceCache::kMaxLongPieceBytes, 'z');
  const std::vector<uint32_t> one_per_byte(longest.size(), 4);
  c.Insert(longest, one_per_byte);
  EXPECT_EQ(Ids(c.Lookup(longest)), one_per_byte);
  EXPECT_TRUE(c.Lookup(longest.substr(1)).empty());
  c.Reset(2);
  EXPECT_TRUE(c.Lookup(long_piece).empty());
  EXPECT_TRUE(c.Lookup(longest).empty());
}

TEST(PieceCacheTest, ForgetLongKeepsTheShortEntries) {
  PieceCache c;
  c.Reset(1);
  const std::string long_piece(PieceCache::kMaxPieceBytes + 5, 'q');
  c.Insert(long_piece, std::vector<uint32_t>{1, 2});
  c.Insert("short", std::vector<uint32_t>{3});
  c.ForgetLong();
  EXPECT_TRUE(c.Lookup(long_piece).empty());
  EXPECT_EQ(Ids(c.Lookup("short")), std::vector<uint32_t>{3});
  c.Insert(long_piece, std::vector<uint32_t>{1, 2});
  EXPECT_EQ(Ids(c.Lookup(long_piece)), (std::vector<uint32_t>{1, 2}));
}

TEST(PieceCacheTest, TooLongIsNeverCached) {
  PieceCache c;
  c.Reset(1);
  const std::string too_long(PieceCache::kMaxLongPieceBytes + 1, 'x');
  c.Insert(too_long, std::vector<uint32_t>{1});
  EXPECT_TRUE(c.Lookup(too_long).empty());
  const std::string longest(PieceCache::kMaxPieceBytes, 'y');
  const std::vector<uint32_t> too_many(PieceCache::kMaxWideIds + 1, 7);
  c.Insert(longest, too_many);
  EXPECT_TRUE(c.Lookup(longest).empty());
  const std::vector<uint32_t> most(PieceCache::kMaxWideIds, 9);
  c.Insert(longest, most);
  EXPECT_EQ(Ids(c.Lookup(longest)), most);
}

TEST(PieceCacheTest, ShortPiecesWithManyIdsUseTheWideTable) {
  PieceCache c;
  c.Reset(1);
  // Nine ids (one more than a 64-byte entry holds) and the most a wide one holds.
  const std::vector<uint32_t> nine = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  c.Insert("abcdefghi", nine);
  EXPECT_EQ(Ids(c.Lookup("abcdefghi")), nine);
  std::vector<uint32_t> most(PieceCache::kMaxWideIds);
  for (size_t i = 0; i < most.size(); ++i) most[i] = 1000 + static_cast<uint32_t>(i);
  const std::string piece(PieceCache::kMaxPieceBytes, '\xE4');
  c.Insert(piece, most);
  EXPECT_EQ(Ids(c.Lookup(piece)), most);
  // Both tables hold entries at once; wide entries live across ForgetLong and
  // die with Reset for another owner.
  c.Insert("abc", std::vector<uint32_t>{42});
  c.ForgetLong();
  EXPECT_EQ(Ids(c.Lookup("abc")), std::vector<uint32_t>{42});
  EXPECT_EQ(Ids(c.Lookup("abcdefghi")), nine);
  EXPECT_TRUE(c.Lookup("abcdefgh").empty());
  c.Reset(2);
  EXPECT_TRUE(c.Lookup("abcdefghi").empty());
  EXPECT_TRUE(c.Lookup(piece).empty());
}

TEST(PieceCacheTest, ResetForAnotherOwnerForgetsEverything) {
  PieceCache c;
  c.Reset(1);
  c.Insert("ab", std::vector<uint32_t>{5});
  c.Reset(1);  // same owner: kept
  EXPECT_EQ(Ids(c.Lookup("ab")), std::vector<uint32_t>{5});
  c.Reset(2);
  EXPECT_TRUE(c.Lookup("ab").empty());
  c.Reset(1);  // back to the first owner: still forgotten, never stale
  EXPECT_TRUE(c.Lookup("ab").empty());
}

TEST(PieceCacheTest, CollidingPiecesEvictEachOtherButNeverMix) {
  PieceCache c;
  c.Reset(1);
  // Many more pieces than slots: every lookup is a miss or the exact ids.
  for (uint32_t i = 0; i < 5 * PieceCache::kSlots; ++i) {
    c.Insert(std::to_string(i), std::vector<uint32_t>{i, i + 1});
  }
  size_t hits = 0;
  for (uint32_t i = 0; i < 5 * PieceCache::kSlots; ++i) {
    const auto got = c.Lookup(std::to_string(i));
    if (got.empty()) continue;
    ++hits;
    ASSERT_EQ(Ids(got), (std::vector<uint32_t>{i, i + 1}));
  }
  EXPECT_GT(hits, PieceCache::kSlots / 4);
  EXPECT_LE(hits, PieceCache::kSlots);  // at most one piece per slot
}

TEST(PieceCacheTest, EachThreadHasItsOwnCache) {
  PieceCache* main_cache = &ThreadPieceCache(7);
  main_cache->Insert("xy", std::vector<uint32_t>{3});
  PieceCache* other = nullptr;
  bool other_saw_entry = true;
  std::thread t([&] {
    other = &ThreadPieceCache(7);
    other_saw_entry = !other->Lookup("xy").empty();
  });
  t.join();
  EXPECT_NE(main_cache, other);
  EXPECT_FALSE(other_saw_entry);
  EXPECT_EQ(&ThreadPieceCache(7), main_cache);
  EXPECT_EQ(Ids(main_cache->Lookup("xy")), std::vector<uint32_t>{3});
}

}  // namespace
}  // namespace llm::tok
