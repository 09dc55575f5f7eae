#include "common/flags.h"

#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

ABSL_FLAG(int, test_count, 3, "How many.");
ABSL_FLAG(double, test_rate, 0.5, "How fast.");
ABSL_FLAG(bool, test_verbose, false, "Say more.");
ABSL_FLAG(std::string, test_name, "", "Whose.");
ABSL_FLAG(int64_t, test_other, 0, "A flag that the restricted command does not take.");

namespace llm {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Kind = FlagParseResult::Kind;

FlagParseResult Parse(std::vector<std::string> args, FlagParseOptions options = {}) {
  args.insert(args.begin(), "/some/dir/prog");
  return TryParseFlags(args, options);
}

class FlagsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::SetFlag(&FLAGS_test_count, 3);
    absl::SetFlag(&FLAGS_test_rate, 0.5);
    absl::SetFlag(&FLAGS_test_verbose, false);
    absl::SetFlag(&FLAGS_test_name, "");
  }
};

TEST_F(FlagsTest, ParsesValuesDashesAndPositionals) {
  const FlagParseResult r = Parse({"--test-count", "7", "pos", "--test_rate=2.5", "-test-name", "x",
                                   "--test-verbose", "--", "--test-count"});
  ASSERT_EQ(r.kind, Kind::kOk) << r.message;
  EXPECT_EQ(absl::GetFlag(FLAGS_test_count), 7);
  EXPECT_EQ(absl::GetFlag(FLAGS_test_rate), 2.5);
  EXPECT_EQ(absl::GetFlag(FLAGS_test_name), "x");
  EXPECT_TRUE(absl::GetFlag(FLAGS_test_verbose));
  EXPECT_EQ(r.positional, (std::vector<std::string>{"/some/dir/prog", "pos", "--test-count"}));
}

TEST_F(FlagsTest, BoolForms) {
  ASSERT_EQ(Parse({"--test_verbose=true"}).kind, Kind::kOk);
  EXPECT_TRUE(absl::GetFlag(FLAGS_test_verbose));
  ASSERT_EQ(Parse({"--notest-verbose"}).kind, Kind::kOk);
  EXPECT_FALSE(absl::GetFlag(FLAGS_test_verbose));
  EXPECT_EQ(Parse({"--test-verbose=maybe"}).kind, Kind::kUsageError);
  EXPECT_EQ(Parse({"--notest-verbose=1"}).kind, Kind::kUsageError);
  // A bool flag does not take the next argument as its value.
  const FlagParseResult r = Parse({"--test-verbose", "false"});
  ASSERT_EQ(r.kind, Kind::kOk);
  EXPECT_TRUE(absl::GetFlag(FLAGS_test_verbose));
  EXPECT_EQ(r.positional.size(), 2u);
}

TEST_F(FlagsTest, UnknownFlagSuggestsTheNearest) {
  FlagParseResult r = Parse({"--test-cuont", "1"});
  ASSERT_EQ(r.kind, Kind::kUsageError);
  EXPECT_EQ(r.message, "prog: unknown flag --test-cuont; did you mean --test-count?");
  r = Parse({"--test_rat=1"});
  ASSERT_EQ(r.kind, Kind::kUsageError);
  EXPECT_EQ(r.message, "prog: unknown flag --test_rat; did you mean --test_rate?");
  r = Parse({"--completely-different"});
  ASSERT_EQ(r.kind, Kind::kUsageError);
  EXPECT_EQ(r.message, "prog: unknown flag --completely-different (see prog --help)");
}

TEST_F(FlagsTest, BadAndMissingValuesNameTheFlag) {
  FlagParseResult r = Parse({"--test-rate", "abc"});
  ASSERT_EQ(r.kind, Kind::kUsageError);
  EXPECT_EQ(r.message, "prog: bad value 'abc' for --test-rate: expected a number");
  r = Parse({"--test-count", "1000000000000"});
  ASSERT_EQ(r.kind, Kind::kUsageError);
  EXPECT_EQ(r.message,
            "prog: bad value '1000000000000' for --test-count: expected an integer from "
            "-2147483648 to 2147483647");
  EXPECT_EQ(absl::GetFlag(FLAGS_test_count), 3);
  r = Parse({"--test-count"});
  ASSERT_EQ(r.kind, Kind::kUsageError);
  EXPECT_EQ(r.message, "prog: --test-count needs a value");
}

TEST_F(FlagsTest, RestrictedFlagsAndProgramName) {
  FlagParseOptions options;
  options.program = "tool run";
  options.flags = {"test_count", "test_rate"};
  EXPECT_EQ(Parse({"--test-count", "4"}, options).kind, Kind::kOk);
  EXPECT_EQ(Parse({"--test-other", "1"}, options).kind, Kind::kOk);  // accepted unless...
  options.reject_unlisted = true;
  FlagParseResult r = Parse({"--test-other", "1"}, options);
  ASSERT_EQ(r.kind, Kind::kUsageError);
  EXPECT_EQ(r.message, "tool run: --test-other does not apply here (see tool run --help)");
  // Suggestions come from the listed flags, written with dashes.
  r = Parse({"--test_cont", "1"}, options);
  ASSERT_EQ(r.kind, Kind::kUsageError);
  EXPECT_THAT(r.message, HasSubstr("did you mean --test_count?"));
  r = Parse({"--test-cont", "1"}, options);
  EXPECT_THAT(r.message, HasSubstr("did you mean --test-count?"));
}

TEST_F(FlagsTest, HelpListsTheFlagsWithoutSourcePaths) {
  FlagParseOptions options;
  options.usage = "prog: does things.";
  for (const char* help : {"--help", "-h", "--helpfull"}) {
    const FlagParseResult r = Parse({"--test-count", "2", help}, options);
    ASSERT_EQ(r.kind, Kind::kHelp) << help;
    EXPECT_THAT(r.message, HasSubstr("prog: does things.\n"));
    EXPECT_THAT(r.message, HasSubstr("  --test_count (default 3)\n      How many.\n"));
    EXPECT_THAT(r.message, HasSubstr("  --test_name (default \"\")\n"));
    EXPECT_THAT(r.message, Not(HasSubstr("flags_test.cc")));
    EXPECT_THAT(r.message, Not(HasSubstr("/")));
    EXPECT_THAT(r.message, Not(HasSubstr("--flagfile")));  // Abseil's own are not listed
  }
  options.flags = {"test_rate"};
  const FlagParseResult r = Parse({"--help"}, options);
  EXPECT_THAT(r.message, HasSubstr("  --test-rate (default 0.5)\n"));
  EXPECT_THAT(r.message, Not(HasSubstr("test-count")));
}

TEST_F(FlagsTest, VersionNamesTheProjectVersionAndBuildType) {
  const FlagParseResult r = Parse({"--version"});
  ASSERT_EQ(r.kind, Kind::kVersion);
  EXPECT_EQ(r.message, "prog " + VersionString() + "\n");
  EXPECT_THAT(VersionString(),
              ::testing::MatchesRegex("[0-9]+\\.[0-9]+\\.[0-9]+ \\(.+ build.*\\)"));
  EXPECT_THAT(VersionString(), Not(HasSubstr("unknown")));
}

TEST_F(FlagsTest, NearestName) {
  const std::vector<std::string> names = {"prompt", "temperature", "top_k", "top_p", "seed"};
  EXPECT_EQ(NearestName("promt", names), "prompt");
  EXPECT_EQ(NearestName("temprature", names), "temperature");
  EXPECT_EQ(NearestName("temp", names), "temperature");  // a unique prefix
  EXPECT_EQ(NearestName("sed", names), "seed");
  EXPECT_EQ(NearestName("zzzzzz", names), "");
  EXPECT_EQ(NearestName("x", {"n", "p"}), "");  // too short to be a typo of anything
}

TEST(FlagsDeathTest, UsageErrorsExitWithStatus2) {
  EXPECT_EXIT(ParseFlagsOrExit({"prog", "--test-cuont=1"}, {}), ::testing::ExitedWithCode(2),
              "unknown flag --test-cuont; did you mean --test-count\\?");
  EXPECT_EXIT(ParseFlagsOrExit({"prog", "--test-count", "x"}, {}), ::testing::ExitedWithCode(2),
              "bad value 'x' for --test-count");
  EXPECT_EXIT(ParseFlagsOrExit({"prog", "--version"}, {}), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace llm
