#include "client/generate/stop_strings.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace llm::client {
namespace {

// Feeds `deltas` and returns everything released (Finish included unless a
// stop string was found), and whether it stopped.
std::pair<std::string, bool> FeedAll(const std::vector<std::string>& stop,
                                     const std::vector<std::string>& deltas) {
  StopStringMatcher m(stop);
  std::string out;
  for (const std::string& d : deltas) {
    StopStringMatcher::Step s = m.Feed(d);
    out += s.released;
    if (s.stopped) return {out, true};
  }
  out += m.Finish();
  return {out, false};
}

TEST(StopStringsTest, ProcessEscapes) {
  EXPECT_EQ(ProcessEscapes("\\n\\n"), "\n\n");
  EXPECT_EQ(ProcessEscapes("a\\tb\\r\\nc"), "a\tb\r\nc");
  EXPECT_EQ(ProcessEscapes("\\\\n"), "\\n");  // an escaped backslash, then 'n'
  EXPECT_EQ(ProcessEscapes("\\\"q\\'"), "\"q'");
  EXPECT_EQ(ProcessEscapes("\\x41 \\d"), "\\x41 \\d");  // not escapes: kept
  EXPECT_EQ(ProcessEscapes("end\\"), "end\\");          // a trailing backslash
  EXPECT_EQ(ProcessEscapes("User:"), "User:");
  EXPECT_EQ(ProcessEscapes(""), "");
}

TEST(StopStringsTest, NoStopStringsReleasesEverythingAtOnce) {
  StopStringMatcher m({});
  EXPECT_EQ(m.Feed("Hello").released, "Hello");
  EXPECT_EQ(m.held_bytes(), 0u);
  EXPECT_EQ(m.Finish(), "");
}

TEST(StopStringsTest, StopInsideOneDelta) {
  EXPECT_EQ(FeedAll({"STOP"}, {"abcSTOPdef"}), std::make_pair(std::string("abc"), true));
}

TEST(StopStringsTest, StopSplitAcrossDeltasNeverLeaks) {
  StopStringMatcher m({"</answer>"});
  EXPECT_EQ(m.Feed("Paris</").released, "Paris");  // "</" may start the stop string
  EXPECT_EQ(m.held_bytes(), 2u);
  EXPECT_EQ(m.Feed("ans").released, "");
  StopStringMatcher::Step s = m.Feed("wer> more");
  EXPECT_TRUE(s.stopped);
  EXPECT_EQ(s.released, "");
  EXPECT_EQ(m.Finish(), "");
  EXPECT_EQ(m.Feed("late").released, "");  // nothing after a stop
}

TEST(StopStringsTest, HeldTextIsReleasedWhenItStopsMatching) {
  StopStringMatcher m({"\n\n"});
  EXPECT_EQ(m.Feed("one\n").released, "one");
  EXPECT_EQ(m.Feed("two").released, "\ntwo");
  EXPECT_FALSE(m.stopped());
}

TEST(StopStringsTest, HeldTextIsReleasedAtTheEnd) {
  EXPECT_EQ(FeedAll({"\n\n"}, {"end\n"}), std::make_pair(std::string("end\n"), false));
}

TEST(StopStringsTest, EarliestOfSeveralStopStringsWins) {
  EXPECT_EQ(FeedAll({"cd", "bcdX", "e"}, {"ab", "cde"}), std::make_pair(std::string("ab"), true));
  EXPECT_EQ(FeedAll({"xyz", "b"}, {"aab"}), std::make_pair(std::string("aa"), true));
}

TEST(StopStringsTest, MatchedSaysWhichStopStringEndedIt) {
  StopStringMatcher m({"cde", "ab", "b"});
  EXPECT_EQ(m.matched(), "");
  EXPECT_FALSE(m.Feed("xa").stopped);
  EXPECT_EQ(m.matched(), "");
  EXPECT_TRUE(m.Feed("bcde").stopped);
  EXPECT_EQ(m.matched(), "ab");  // earliest; "b" starts later
  StopStringMatcher tie({"b", "bc"});
  EXPECT_TRUE(tie.Feed("abc").stopped);
  EXPECT_EQ(tie.matched(), "b");  // same place: the first given
}

TEST(StopStringsTest, LongestPrefixIsHeld) {
  // "aab" could still become "aabc" (the second stop string).
  StopStringMatcher m({"ab!", "aabc"});
  EXPECT_EQ(m.Feed("xaab").released, "x");
  EXPECT_EQ(m.held_bytes(), 3u);
  StopStringMatcher::Step s = m.Feed("c");
  EXPECT_TRUE(s.stopped);
  EXPECT_EQ(s.released, "");
}

TEST(StopStringsTest, OverlappingPrefixFallsBackToShorterOne) {
  // "aa" then "a": the stop string "aab" matches at the second 'a'.
  EXPECT_EQ(FeedAll({"aab"}, {"a", "a", "a", "b"}), std::make_pair(std::string("a"), true));
}

TEST(StopStringsTest, EveryByteSplitGivesTheSameOutput) {
  const std::string text = "The capital of France is Paris.\n\nUser: next";
  const std::vector<std::string> stop = {"\n\nUser:", "Paris!"};
  for (size_t a = 0; a <= text.size(); ++a) {
    for (size_t b = a; b <= text.size(); b += 3) {
      auto [out, stopped] =
          FeedAll(stop, {text.substr(0, a), text.substr(a, b - a), text.substr(b)});
      EXPECT_TRUE(stopped);
      EXPECT_EQ(out, "The capital of France is Paris.") << a << " " << b;
    }
  }
}

TEST(StopStringsTest, Utf8StopStringReleasesWholeCharacters) {
  // "é" is C3 A9; the stop string starts with it.
  StopStringMatcher m({"\xC3\xA9t\xC3\xA9"});
  EXPECT_EQ(m.Feed("caf\xC3\xA9").released, "caf");
  EXPECT_EQ(m.Feed("!").released, "\xC3\xA9!");
}

TEST(StopStringsTest, EmptyStopStringIsInvalid) {
  EXPECT_FALSE(ValidateStopStrings({"a", ""}).ok());
  EXPECT_TRUE(ValidateStopStrings({"a", "b"}).ok());
}

}  // namespace
}  // namespace llm::client
