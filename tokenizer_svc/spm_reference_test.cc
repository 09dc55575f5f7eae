// SentencePiece vocabularies against llama.cpp's own tokenizer:
//  - Gemma 3's vocabulary (models/gemma-3-270m-q4_k_m.gguf, which
//    scripts/fetch-model.sh gemma3-270m puts in place; scripts/test.sh fetches
//    it): ids and decoded text recorded by llama.cpp in
//    testdata/gemma3_reference.jsonl (testdata/spm_reference.py says how), for
//    the 432 conformance texts, the 46 texts of llama.cpp's vocabulary tests
//    and hard cases, with and without special-token parsing. The model
//    missing is a failure, not a skip.
//  - llama.cpp's vocabulary test files (ggml-vocab-{llama-spm,phi-3,qwen2,
//    qwen35}.gguf with their .inp/.out; the last two are byte-level BPE with
//    the qwen2 and qwen35 pre-tokenizers), read from
//    ../shared/conformance/llama-vocab/ (LLM_LLAMACPP_VOCABS names another
//    folder, e.g. llama.cpp's models/). A missing file is a failure, not a
//    skip.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_split.h"
#include "common/mapped_file.h"
#include "common/test_paths.h"
#include "tokenizer_svc/incremental_decoder.h"
#include "tokenizer_svc/tokenizer.h"

namespace llm::tok {
namespace {

// Incremental decoding, one id at a time, gives the concatenated token bytes.
std::string Streamed(const Tokenizer& tok, const std::vector<uint32_t>& ids) {
  IncrementalDecoder dec(tok);
  std::string out;
  for (const uint32_t id : ids) EXPECT_TRUE(dec.Add({&id, 1}, &out).ok());
  return out + dec.Flush();
}

std::string Pieces(const Tokenizer& tok, const std::vector<uint32_t>& ids) {
  std::string out;
  for (const uint32_t id : ids) out += *tok.TokenBytes(id);
  return out;
}

TEST(Gemma3Reference, IdsAndTextEqualLlamaCpp) {
  const std::string model = testing::SourceDir() + "/models/gemma-3-270m-q4_k_m.gguf";
  ASSERT_TRUE(std::filesystem::exists(model))
      << model << " is missing: run scripts/fetch-model.sh gemma3-270m";
  auto tok = Tokenizer::Load({.path = model});
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->vocab().model, VocabModel::kSentencePiece);
  EXPECT_FALSE((*tok)->vocab().add_space_prefix);
  auto file =
      ReadFileToString(testing::SourceDir() + "/tokenizer_svc/testdata/gemma3_reference.jsonl");
  ASSERT_TRUE(file.ok()) << file.status();
  std::vector<std::string> lines = absl::StrSplit(*file, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 597u);
  EXPECT_EQ(nlohmann::json::parse(lines[0]).at("vocab"), "gemma-3-270m-q4_k_m.gguf");
  int matched = 0;
  for (size_t i = 1; i < lines.size(); ++i) {
    const auto j = nlohmann::json::parse(lines[i]);
    const std::string text = j.contains("hex")
                                 ? absl::HexStringToBytes(j.at("hex").get<std::string>())
                                 : j.at("text").get<std::string>();
    const std::string decoded = j.contains("decoded_hex")
                                    ? absl::HexStringToBytes(j.at("decoded_hex").get<std::string>())
                                    : text;
    const auto expected = j.at("ids").get<std::vector<uint32_t>>();
    EncodeOptions options;
    options.allow_all_special = j.at("special").get<bool>();
    auto ids = (*tok)->Encode(text, options);
    ASSERT_TRUE(ids.ok()) << ids.status();
    EXPECT_EQ(*ids, expected) << "line " << i + 1 << ": " << ::testing::PrintToString(text);
    if (*ids == expected) ++matched;
    auto back = (*tok)->DecodeText(expected);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, decoded) << "line " << i + 1;
    // No space prefix: the streamed text is the whole decode.
    EXPECT_EQ(Streamed(**tok, expected), decoded) << "line " << i + 1;
  }
  EXPECT_EQ(matched, 596);
}

class LlamaCppVocab : public ::testing::TestWithParam<std::string> {};

TEST_P(LlamaCppVocab, IdsEqualLlamaCppTests) {
  const char* env = std::getenv("LLM_LLAMACPP_VOCABS");
  const std::string dir = env != nullptr && *env != '\0'
                              ? std::string(env)
                              : testing::SharedDir() + "/conformance/llama-vocab";
  const std::string base = dir + "/ggml-vocab-" + GetParam() + ".gguf";
  ASSERT_TRUE(std::filesystem::exists(base)) << base << " is missing";
  auto tok = Tokenizer::Load({.path = base});
  ASSERT_TRUE(tok.ok()) << tok.status();
  auto inp = ReadFileToString(base + ".inp");
  auto out = ReadFileToString(base + ".out");
  ASSERT_TRUE(inp.ok()) << inp.status();
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<std::string> texts = absl::StrSplit(*inp, "\n__ggml_vocab_test__\n");
  ASSERT_TRUE(texts.back().empty());
  texts.pop_back();
  std::vector<std::string> lines = absl::StrSplit(*out, '\n');
  ASSERT_GE(lines.size(), texts.size());
  ASSERT_GE(texts.size(), 46u);
  int matched = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    std::vector<uint32_t> expected;
    const std::vector<std::string> parts = absl::StrSplit(lines[i], ' ', absl::SkipEmpty());
    for (const std::string& part : parts) {
      expected.push_back(std::stoul(part));
    }
    auto ids = (*tok)->Encode(texts[i], {});
    ASSERT_TRUE(ids.ok()) << ids.status();
    EXPECT_EQ(*ids, expected) << GetParam() << " test " << i << ": "
                              << ::testing::PrintToString(texts[i].substr(0, 80));
    if (*ids == expected) ++matched;
    // SentencePiece: the space prefix comes back as the first piece's space,
    // and DecodeText drops it.
    auto decoded = (*tok)->DecodeText(*ids);
    ASSERT_TRUE(decoded.ok());
    EXPECT_EQ(*decoded, texts[i]) << GetParam() << " test " << i;
    const bool prefix = (*tok)->vocab().add_space_prefix && !texts[i].empty();
    EXPECT_EQ(Pieces(**tok, *ids), (prefix ? " " : "") + texts[i]);
  }
  std::printf("%s: %d of %zu texts identical\n", GetParam().c_str(), matched, texts.size());
}

INSTANTIATE_TEST_SUITE_P(Vocabs, LlamaCppVocab,
                         ::testing::Values("llama-spm", "phi-3", "qwen2", "qwen35"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace llm::tok
