#include "client/generate/ngram_proposer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

namespace llm::client {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

std::vector<int32_t> Propose(const std::vector<int32_t>& history, int32_t k, int min_ngram = 1) {
  std::vector<int32_t> out = {99};  // replaced
  ProposeByNgram(history, k, min_ngram, &out);
  return out;
}

TEST(NgramProposerTest, ContinuesTheLatestEarlierOccurrenceOfTheLongestSuffix) {
  // "1 2 3" occurred at 0 (then 4 5 6) and at 6 (then 7 8): the latest wins.
  const std::vector<int32_t> h = {1, 2, 3, 4, 5, 6, 1, 2, 3, 7, 8, 0, 1, 2, 3};
  EXPECT_THAT(Propose(h, 4), ElementsAre(7, 8, 0, 1));
  EXPECT_THAT(Propose(h, 1), ElementsAre(7));
}

TEST(NgramProposerTest, ALongerMatchBeatsAMoreRecentShorterOne) {
  // Suffix "5 6 7": as a trigram at 0 (then 8 9); "6 7" alone is more
  // recent at 5 (then 1).
  const std::vector<int32_t> h = {5, 6, 7, 8, 9, 6, 7, 1, 5, 6, 7};
  EXPECT_THAT(Propose(h, 2), ElementsAre(8, 9));
}

TEST(NgramProposerTest, FallsBackToShorterSuffixes) {
  EXPECT_THAT(Propose({4, 9, 2, 4}, 3), ElementsAre(9, 2, 4));  // unigram "4"
  EXPECT_THAT(Propose({4, 9, 2, 4}, 3, /*min_ngram=*/2), IsEmpty());
  EXPECT_THAT(Propose({1, 2, 3, 4}, 3), IsEmpty());  // nothing repeats
}

TEST(NgramProposerTest, AContinuationPastTheEndRepeatsItself) {
  // "7 7 7" at 0 is followed by 7, then the proposal copies itself.
  EXPECT_THAT(Propose({7, 7, 7, 7}, 5), ElementsAre(7, 7, 7, 7, 7));
  // "3" at 0 is followed by 4 3, then 4 3 4 ...
  EXPECT_THAT(Propose({3, 4, 3}, 5), ElementsAre(4, 3, 4, 3, 4));
  // A period of 3.
  EXPECT_THAT(Propose({1, 2, 3, 1, 2, 3}, 4), ElementsAre(1, 2, 3, 1));
}

TEST(NgramProposerTest, EdgeCases) {
  EXPECT_THAT(Propose({}, 4), IsEmpty());
  EXPECT_THAT(Propose({1}, 4), IsEmpty());
  EXPECT_THAT(Propose({1, 1}, 0), IsEmpty());
  EXPECT_THAT(Propose({1, 1}, 4), ElementsAre(1, 1, 1, 1));
}

}  // namespace
}  // namespace llm::client
