#include "common/token_mask.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace llm {
namespace {

using ::testing::HasSubstr;

MATCHER_P(IsInvalid, substring, "") {
  return arg.status().code() == absl::StatusCode::kInvalidArgument &&
         std::string(arg.status().message()).find(substring) != std::string::npos;
}

TEST(TokenMaskTest, AllowAllAndNoneCoverTheVocabularyOnly) {
  for (int64_t vocab : {1, 63, 64, 65, 1003}) {
    const TokenMask all = TokenMask::AllowAll(vocab);
    EXPECT_EQ(all.vocab_size(), vocab);
    EXPECT_EQ(all.CountAllowed(), vocab);
    EXPECT_TRUE(all.AllowsAll());
    EXPECT_TRUE(all.allowed(vocab - 1));
    EXPECT_FALSE(all.allowed(vocab));  // past the vocabulary
    EXPECT_FALSE(all.allowed(-1));
    EXPECT_EQ(all.words().size(), static_cast<size_t>((vocab + 63) / 64));
    const TokenMask none = TokenMask::AllowNone(vocab);
    EXPECT_TRUE(none.AllowsNone());
    EXPECT_FALSE(none.allowed(0));
  }
}

TEST(TokenMaskTest, AllowAndDisallowSetOneBit) {
  TokenMask m = TokenMask::AllowNone(130);
  m.Allow(0);
  m.Allow(64);
  m.Allow(129);
  EXPECT_EQ(m.CountAllowed(), 3);
  EXPECT_TRUE(m.allowed(64));
  EXPECT_FALSE(m.allowed(65));
  m.Disallow(64);
  EXPECT_FALSE(m.allowed(64));
  EXPECT_EQ(m.words()[2], uint64_t{1} << 1);  // id 129: word 2, bit 1
}

TEST(TokenMaskTest, FromBitsetReadsLittleEndianBitOrder) {
  // Vocabulary of 12: two bytes, the second's upper four bits padding.
  std::string bytes = {static_cast<char>(0b1000'0001), static_cast<char>(0b0000'0100)};
  absl::StatusOr<TokenMask> m = TokenMask::FromBitset(bytes, 12, "mask");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->CountAllowed(), 3);
  EXPECT_TRUE(m->allowed(0));
  EXPECT_TRUE(m->allowed(7));
  EXPECT_TRUE(m->allowed(10));
  EXPECT_FALSE(m->allowed(8));
}

TEST(TokenMaskTest, FromBitsetRefusesBadSizesPaddingAndNothing) {
  EXPECT_THAT(TokenMask::FromBitset(std::string(1, '\1'), 12, "mask"),
              IsInvalid("mask.bitset has 1 bytes; a vocabulary of 12 tokens takes 2"));
  EXPECT_THAT(TokenMask::FromBitset(std::string(3, '\1'), 12, "mask"), IsInvalid("has 3 bytes"));
  EXPECT_THAT(TokenMask::FromBitset("", 12, "mask"), IsInvalid("has 0 bytes"));
  // Bit 12 (the second byte's bit 4) is past a vocabulary of 12.
  EXPECT_THAT(TokenMask::FromBitset(std::string{'\1', '\x10'}, 12, "proposed_masks[1]"),
              IsInvalid("proposed_masks[1].bitset sets bit 12, past the vocabulary of 12"));
  EXPECT_THAT(TokenMask::FromBitset(std::string(2, '\0'), 12, "mask"),
              IsInvalid("mask allows no token"));
  // A whole last byte: no padding to check.
  EXPECT_TRUE(TokenMask::FromBitset(std::string{'\0', '\x80'}, 16, "mask").ok());
}

TEST(TokenMaskTest, FromAllowedTakesExactlyTheIds) {
  const std::vector<uint32_t> ids = {0, 5, 64, 99};
  absl::StatusOr<TokenMask> m = TokenMask::FromAllowed(ids, 100, "mask");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->CountAllowed(), 4);
  for (uint32_t id : ids) EXPECT_TRUE(m->allowed(id)) << id;
  EXPECT_FALSE(m->allowed(1));
}

TEST(TokenMaskTest, FromDisallowedTakesEverythingElse) {
  const std::vector<uint32_t> ids = {1, 63, 64};
  absl::StatusOr<TokenMask> m = TokenMask::FromDisallowed(ids, 70, "mask");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->CountAllowed(), 67);
  EXPECT_FALSE(m->allowed(63));
  EXPECT_TRUE(m->allowed(69));
  EXPECT_FALSE(m->allowed(70));  // the padding stays clear
  EXPECT_EQ(m->words()[1] >> 6, 0u);
  // None disallowed: every token.
  absl::StatusOr<TokenMask> all = TokenMask::FromDisallowed({}, 70, "mask");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(*all, TokenMask::AllowAll(70));
}

TEST(TokenMaskTest, ListsMustBeSortedDistinctInRangeAndBounded) {
  const std::vector<uint32_t> unsorted = {3, 2};
  EXPECT_THAT(TokenMask::FromAllowed(unsorted, 10, "mask"),
              IsInvalid("mask.allowed id 2 at index 1 does not follow id 3 in increasing order"));
  const std::vector<uint32_t> repeated = {2, 2};
  EXPECT_THAT(TokenMask::FromDisallowed(repeated, 10, "mask"),
              IsInvalid("mask.disallowed id 2 at index 1 does not follow id 2"));
  const std::vector<uint32_t> out_of_range = {1, 10};
  EXPECT_THAT(TokenMask::FromAllowed(out_of_range, 10, "mask"),
              IsInvalid("mask.allowed id 10 at index 1 is out of range [0, 10)"));
  const std::vector<uint32_t> huge = {4294967295u};
  EXPECT_THAT(TokenMask::FromAllowed(huge, 10, "mask"), IsInvalid("id 4294967295 at index 0"));
  const std::vector<uint32_t> too_many(11, 0);
  EXPECT_THAT(TokenMask::FromAllowed(too_many, 10, "mask"),
              IsInvalid("mask.allowed has 11 ids, more than the vocabulary's 10"));
  EXPECT_THAT(TokenMask::FromAllowed({}, 10, "mask"), IsInvalid("mask allows no token"));
  std::vector<uint32_t> every(10);
  for (uint32_t i = 0; i < 10; ++i) every[i] = i;
  EXPECT_THAT(TokenMask::FromDisallowed(every, 10, "mask"), IsInvalid("mask allows no token"));
}

TEST(TokenMaskTest, NoVocabularyTakesAMask) {
  EXPECT_THAT(TokenMask::FromBitset("", 0, "mask"), IsInvalid("vocabulary of 0 tokens"));
  EXPECT_THAT(TokenMask::FromAllowed({}, -5, "mask"), IsInvalid("vocabulary of -5 tokens"));
  EXPECT_THAT(TokenMask::FromDisallowed({}, int64_t{1} << 40, "mask"), IsInvalid("no mask fits"));
}

}  // namespace
}  // namespace llm
