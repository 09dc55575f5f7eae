// Conformance: every reference vector must come out identical.
//  - ../shared/tokenizer/vectors/*.jsonl: tiktoken's own ids for 432 texts in
//    r50k_base, p50k_base, cl100k_base and o200k_base.
//  - ../shared/conformance/llama-vocab/*.gguf.{inp,out}: Hugging Face's ids for
//    46 texts in 8 GGUF vocabularies (no BOS, special tokens not parsed).
// Plus round trips: Decode(Encode(s)) == s, and incremental decoding equals
// full decoding however the ids are split.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "common/mapped_file.h"
#include "common/test_paths.h"
#include "tokenizer_svc/incremental_decoder.h"
#include "tokenizer_svc/testing/vectors.h"
#include "tokenizer_svc/tokenizer.h"

namespace llm::tok {
namespace {

using testing::ReadVectors;

void ExpectIncrementalMatches(const Tokenizer& tok, const std::vector<uint32_t>& ids,
                              const std::string& expected, std::mt19937& rng) {
  // One id at a time, then random chunkings.
  for (int trial = 0; trial < 4; ++trial) {
    IncrementalDecoder dec(tok);
    std::string out;
    size_t i = 0;
    while (i < ids.size()) {
      const size_t n = trial == 0 ? 1 : 1 + rng() % 4;
      const size_t take = std::min(n, ids.size() - i);
      ASSERT_TRUE(dec.Add(std::span(ids).subspan(i, take), &out).ok());
      i += take;
    }
    out += dec.Flush();
    ASSERT_EQ(out, expected);
  }
}

class TiktokenVectors : public ::testing::TestWithParam<std::string> {};

TEST_P(TiktokenVectors, IdsEqualTiktokenAndRoundTrip) {
  const std::string dir = testing::SharedDir() + "/tokenizer";
  const std::string path = dir + "/" + GetParam() + ".tiktoken";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "missing " << path;
  auto tok = Tokenizer::Load({.path = path});
  ASSERT_TRUE(tok.ok()) << tok.status();
  const auto vectors = ReadVectors(dir + "/vectors/" + GetParam() + ".jsonl");
  ASSERT_EQ(vectors.size(), 432u);
  std::mt19937 rng(7);
  int mismatches = 0;
  for (const auto& v : vectors) {
    auto ids = (*tok)->Encode(v.text, {});
    ASSERT_TRUE(ids.ok()) << ids.status();
    if (*ids != v.ids) {
      ++mismatches;
      ADD_FAILURE() << GetParam() << ": mismatch for text of " << v.text.size()
                    << " bytes: " << ::testing::PrintToString(v.text.substr(0, 80))
                    << "\n expected " << ::testing::PrintToString(v.ids) << "\n got      "
                    << ::testing::PrintToString(*ids);
      if (mismatches > 5) return;
    }
    auto text = (*tok)->Decode(v.ids);
    ASSERT_TRUE(text.ok());
    EXPECT_EQ(*text, v.text);
    ExpectIncrementalMatches(**tok, v.ids, v.text, rng);
  }
}

INSTANTIATE_TEST_SUITE_P(AllEncodings, TiktokenVectors,
                         ::testing::Values("r50k_base", "p50k_base", "cl100k_base", "o200k_base"));

class LlamaVocab : public ::testing::TestWithParam<std::string> {};

TEST_P(LlamaVocab, IdsEqualReference) {
  const std::string base =
      testing::SharedDir() + "/conformance/llama-vocab/ggml-vocab-" + GetParam() + ".gguf";
  if (!std::filesystem::exists(base)) GTEST_SKIP() << "missing " << base;
  auto tok = Tokenizer::Load({.path = base});
  ASSERT_TRUE(tok.ok()) << tok.status();
  auto inp = ReadFileToString(base + ".inp");
  auto out = ReadFileToString(base + ".out");
  ASSERT_TRUE(inp.ok() && out.ok());
  std::vector<std::string> texts = absl::StrSplit(*inp, "\n__ggml_vocab_test__\n");
  ASSERT_FALSE(texts.empty());
  ASSERT_TRUE(texts.back().empty());
  texts.pop_back();
  std::vector<std::string> lines = absl::StrSplit(*out, '\n');
  ASSERT_GE(lines.size(), texts.size());
  ASSERT_EQ(texts.size(), 46u);
  std::mt19937 rng(11);
  for (size_t i = 0; i < texts.size(); ++i) {
    std::vector<uint32_t> expected;
    const std::vector<std::string> parts = absl::StrSplit(lines[i], ' ', absl::SkipEmpty());
    for (const std::string& part : parts) expected.push_back(std::stoul(part));
    auto ids = (*tok)->Encode(texts[i], {});
    ASSERT_TRUE(ids.ok()) << ids.status();
    EXPECT_EQ(*ids, expected) << GetParam() << " test " << i << ": "
                              << ::testing::PrintToString(texts[i].substr(0, 80));
    auto decoded = (*tok)->Decode(*ids);
    ASSERT_TRUE(decoded.ok());
    EXPECT_EQ(*decoded, texts[i]) << GetParam() << " test " << i;
    ExpectIncrementalMatches(**tok, *ids, texts[i], rng);
  }
}

INSTANTIATE_TEST_SUITE_P(AllVocabs, LlamaVocab,
                         ::testing::Values("gpt-2", "mpt", "starcoder", "refact", "falcon",
                                           "deepseek-coder", "deepseek-llm", "llama-bpe"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace llm::tok
