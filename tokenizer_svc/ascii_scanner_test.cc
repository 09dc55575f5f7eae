// The ASCII scanner in front of PCRE2 against PCRE2 alone, differentially:
// every conformance text, their concatenation, and random text mixing ASCII
// with the non-ASCII characters the patterns treat specially.
#include "tokenizer_svc/ascii_scanner.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "common/test_paths.h"
#include "tokenizer_svc/pretokenizer.h"
#include "tokenizer_svc/testing/vectors.h"

namespace llm::tok {
namespace {

std::vector<std::string> Pieces(const Pretokenizer& pre, std::string_view text) {
  std::vector<std::string> out;
  pre.ForEachPiece(text, [&](std::string_view p) { out.emplace_back(p); });
  return out;
}

class AsciiScannerTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ = llm::testing::SharedDir() + "/tokenizer";
    const std::string sidecar = dir_ + "/" + GetParam() + ".json";
    if (!std::filesystem::exists(sidecar)) GTEST_SKIP() << "missing " << sidecar;
    std::ifstream in(sidecar);
    pattern_ = nlohmann::json::parse(in).at("pat_str").get<std::string>();
    auto fast = Pretokenizer::Create({pattern_});
    auto pcre = Pretokenizer::Create({pattern_}, /*ascii_scanner=*/false);
    ASSERT_TRUE(fast.ok() && pcre.ok());
    fast_ = std::move(*fast);
    pcre_ = std::move(*pcre);
  }

  void ExpectSamePieces(std::string_view text) {
    ASSERT_EQ(Pieces(*fast_, text), Pieces(*pcre_, text)) << text;
  }

  std::string dir_;
  std::string pattern_;
  std::unique_ptr<Pretokenizer> fast_;
  std::unique_ptr<Pretokenizer> pcre_;
};

TEST_P(AsciiScannerTest, RecognizesThePattern) {
  EXPECT_NE(FindAsciiMatcher(pattern_), nullptr);
  EXPECT_EQ(FindAsciiMatcher(pattern_ + "|x"), nullptr);
}

TEST_P(AsciiScannerTest, ConformanceTextsSplitAsPcre2Does) {
  const auto vectors = llm::testing::ReadVectors(dir_ + "/vectors/" + GetParam() + ".jsonl");
  ASSERT_FALSE(vectors.empty());
  std::string all;
  for (const auto& v : vectors) {
    ExpectSamePieces(v.text);
    all += v.text;
    all += '\n';
  }
  ExpectSamePieces(all);
}

TEST_P(AsciiScannerTest, HandPickedCases) {
  const char* const kCases[] = {"Hello world's  \n\n  x",
                                "don't DON'T I'm we'LL they're 's 'S 'x",
                                "  \t\n \r\n  a",
                                "abc123456789 1234 x1y22",
                                "a   ",
                                "   ",
                                " \n",
                                "x\n",
                                "+=-> ./\n\n//\r\n/ x",
                                "CamelCaseWORDSand lower UPPER'S ABCdef's",
                                "\x0b\x0c\x1c\x1d\x1f\x7f",
                                "' '",
                                "'",
                                "a'",
                                "a'r",
                                "a're",
                                "a'l",
                                "a'll",
                                "\ta",
                                "\t+",
                                " +",
                                "!a",
                                "\na",
                                "a\xCC\x81",
                                "e\xCC\x81t\xC3\xA9",
                                "x\xC2\xA0y",
                                "a \xC2\xA0 b",
                                " \xC2\x85",
                                "12\xD9\xA3",
                                "1\xC2\xB2",
                                "a\xFF!",
                                "\xFF",
                                "ab\xC3",
                                "x'\xC5\xBF",
                                " \xE4\xB8\xAD",
                                "!\xE2\x80\xA8"};
  for (const char* text : kCases) {
    ExpectSamePieces(text);
  }
}

TEST_P(AsciiScannerTest, RandomTextSplitsAsPcre2Does) {
  // ASCII, each byte value, and characters that are letters, marks, digits or
  // whitespace outside ASCII, plus invalid UTF-8.
  std::vector<std::string> alphabet;
  for (int c = 0; c < 128; ++c) alphabet.emplace_back(1, static_cast<char>(c));
  const char* const kExtra[] = {"a",
                                "b",
                                "Z",
                                "'",
                                " ",
                                " ",
                                "\n",
                                "\r",
                                "s",
                                "t",
                                "l",
                                "e",
                                "r",
                                "v",
                                "1",
                                "/",
                                ".",
                                "\xC3\xA9",
                                "\xC3\x89",
                                "\xC5\xBF",
                                "\xE2\x84\xAA",
                                "\xCC\x81",
                                "\xC2\xA0",
                                "\xC2\x85",
                                "\xE2\x80\xA8",
                                "\xE3\x80\x80",
                                "\xE4\xB8\xAD",
                                "\xD9\xA3",
                                "\xC2\xB2",
                                "\xF0\x9F\x98\x80",
                                "\xCA\xB0",
                                "\xC7\x85",
                                "\xFF",
                                "\xC3",
                                "\x80"};
  for (const char* s : kExtra) {
    alphabet.emplace_back(s);
  }
  std::mt19937 rng(17);
  for (int trial = 0; trial < 20000; ++trial) {
    std::string text;
    const size_t n = 1 + rng() % 24;
    for (size_t i = 0; i < n; ++i) text += alphabet[rng() % alphabet.size()];
    ExpectSamePieces(text);
    if (HasFatalFailure()) return;
  }
}

INSTANTIATE_TEST_SUITE_P(Tiktoken, AsciiScannerTest,
                         ::testing::Values("cl100k_base", "o200k_base"));

}  // namespace
}  // namespace llm::tok
