// Malformed vocabulary files: each gets an error naming the problem and where.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "common/gguf/gguf_writer.h"
#include "common/test_paths.h"
#include "tokenizer_svc/gguf_vocab_loader.h"
#include "tokenizer_svc/pretokenizer.h"
#include "tokenizer_svc/tiktoken_loader.h"
#include "tokenizer_svc/tokenizer.h"

namespace llm::tok {
namespace {

using ::testing::HasSubstr;

TiktokenOptions Pattern() { return {.pattern = std::string(R"(\S+|\s+)")}; }

void ExpectTiktokenError(const std::string& contents, const std::string& needle,
                         const TiktokenOptions& options = Pattern()) {
  auto v = ParseTiktoken(contents, "test.tiktoken", options);
  ASSERT_FALSE(v.ok()) << "accepted: " << contents;
  EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(v.status().message(), HasSubstr(needle));
}

TEST(TiktokenLoaderTest, ParsesTheSeedsFormat) {
  // "X24= 1107" etc. from the seed, renumbered from 0.
  auto v = ParseTiktoken("YQ== 0\nYg== 1\nYWI= 2\n", "t", Pattern());
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->token_bytes[2], "ab");
  auto tok = Tokenizer::Create(*std::move(v));
  ASSERT_TRUE(tok.ok());
  EXPECT_THAT(*(*tok)->Encode("abba", {}), ::testing::ElementsAre(2, 1, 0));
}

TEST(TiktokenLoaderTest, RejectsMalformedLinesWithTheirNumber) {
  ExpectTiktokenError("YQ== 0\n!!!! 1\n", "test.tiktoken:2: bad base64");
  ExpectTiktokenError("YQ== 0\nYg==\n", ":2: expected '<base64> <rank>'");
  ExpectTiktokenError("YQ== 0\nYg== x\n", ":2: rank 'x' is not a number");
  ExpectTiktokenError("YQ== 0\nYg== -1\n", ":2: rank '-1' is not a number");
  ExpectTiktokenError("YQ== 0\nYg== 0\n", ":2: duplicate rank 0");
  ExpectTiktokenError("YQ== 0\nYQ== 1\n", ":2: duplicate token bytes");
  ExpectTiktokenError("YQ== 0\nYg== 99999999999\n", ":2: rank '99999999999' is not a number");
  ExpectTiktokenError("YQ== 0\nYg== 20000000\n", "absurdly large");
  ExpectTiktokenError("YQ== 0\nYg== 2\n", "rank 1 is missing");
  ExpectTiktokenError(std::string(10000, 'Q') + " 0\n", "out of range");
  ExpectTiktokenError("", "no tokens");
  ExpectTiktokenError("YQ== 0\n", "no pre-tokenizer pattern", TiktokenOptions{});
  ExpectTiktokenError("YQ== 0\n", "is also the rank on line 1",
                      {.pattern = std::string("."), .special_tokens = {{"<s>", 0}}});
}

// Ranks in any order; when a file has several faults, the one on the
// earliest line is reported, as when each line was checked in turn.
TEST(TiktokenLoaderTest, RanksInAnyOrderAndTheEarliestFault) {
  auto v = ParseTiktoken("Yg== 1\nYw== 2\nYQ== 0\n", "t", Pattern());
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->token_bytes, (std::vector<std::string>{"a", "b", "c"}));
  ExpectTiktokenError("Yg== 1\nYQ== 0\nYw== 1\n", ":3: duplicate rank 1 (first on line 1)");
  ExpectTiktokenError("Yg== 1\nYQ== 0\nYw== 1\nYQ== 2\n", ":3: duplicate rank 1");
  ExpectTiktokenError("YQ== 0\nYg== 1\nYQ== 2\nYw== 1\n",
                      ":3: duplicate token bytes (also rank 0)");
  ExpectTiktokenError("Yg== 1\nYQ== 0\nYQ== 2\nYw== 1\n",
                      ":3: duplicate token bytes (also rank 0)");
  ExpectTiktokenError("YQ== 0\nYQ== 1\n!!!! 2\n", ":2: duplicate token bytes");
  ExpectTiktokenError("Yg== 1\nYQ== 0\n!!!! 1\nYw== 0\n", ":3: bad base64");
  ExpectTiktokenError("Yg== 3\nYQ== 0\n", "rank 1 is missing");
  auto filled =
      ParseTiktoken("Yw== 3\nYQ== 0\n", "t",
                    {.pattern = std::string("."), .special_tokens = {{"<x>", 1}, {"<y>", 2}}});
  ASSERT_TRUE(filled.ok()) << filled.status();
  EXPECT_EQ(filled->token_bytes, (std::vector<std::string>{"a", "<x>", "<y>", "c"}));
  ExpectTiktokenError("Yw== 3\nYQ== 0\n", "is also the rank on line 1",
                      {.pattern = std::string("."), .special_tokens = {{"<x>", 3}}});
}

// A real vocabulary with its lines shuffled loads to the same tokens.
TEST(TiktokenLoaderTest, ShuffledLinesGiveTheSameVocabulary) {
  const std::string path = llm::testing::SharedDir() + "/tokenizer/cl100k_base.tiktoken";
  std::ifstream in(path, std::ios::binary);
  if (!in) GTEST_SKIP() << "missing " << path;
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::string joined;
  for (const std::string& line : lines) joined += line + "\n";
  std::mt19937 rng(1);
  std::shuffle(lines.begin(), lines.end(), rng);
  std::string shuffled;
  for (const std::string& line : lines) shuffled += line + "\n";
  auto a = ParseTiktoken(joined, "a", Pattern());
  auto b = ParseTiktoken(shuffled, "b", Pattern());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->token_bytes, b->token_bytes);
  EXPECT_EQ(a->token_types, b->token_types);
}

TEST(TiktokenLoaderTest, ASpecialTokenMayFillARankGap) {
  auto v = ParseTiktoken("YQ== 0\nYg== 2\n", "t",
                         {.pattern = std::string("."), .special_tokens = {{"<eot>", 1}}});
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->token_types[1], TokenType::kControl);
}

TEST(TiktokenLoaderTest, SidecarErrors) {
  TiktokenOptions o;
  EXPECT_FALSE(ParseTiktokenSidecar("{", "x.json", &o).ok());
  EXPECT_FALSE(ParseTiktokenSidecar(R"({"pat_str": 3})", "x.json", &o).ok());
  EXPECT_FALSE(ParseTiktokenSidecar(R"({"special_tokens": {"<a>": -1}})", "x.json", &o).ok());
  ASSERT_TRUE(
      ParseTiktokenSidecar(R"({"pat_str": "\\s+", "special_tokens": {"<a>": 5}})", "x.json", &o)
          .ok());
  EXPECT_EQ(*o.pattern, "\\s+");
  EXPECT_EQ(o.special_tokens.size(), 1u);
}

// A minimal valid GGUF vocabulary; `mutate` can break it.
std::string GgufVocab(const std::function<void(gguf::testing::GgufBuilder&)>& extra = nullptr,
                      bool with_types = true, std::string model = "gpt2") {
  gguf::testing::GgufBuilder b;
  b.AddString("tokenizer.ggml.model", model);
  b.AddString("tokenizer.ggml.pre", "gpt-2");
  b.AddStringArray("tokenizer.ggml.tokens", {"a", "b", "ab", "\xC4\xA0", "<s>"});
  if (with_types) b.AddInt32Array("tokenizer.ggml.token_type", {1, 1, 1, 1, 3});
  b.AddStringArray("tokenizer.ggml.merges", {"a b"});
  if (extra) extra(b);
  return b.Serialize();
}

absl::StatusOr<Vocab> LoadBytes(const std::string& bytes) {
  auto file = gguf::File::FromBytes(bytes, "vocab.gguf");
  if (!file.ok()) return file.status();
  return VocabFromGguf(**file, std::nullopt);
}

TEST(GgufVocabLoaderTest, LoadsAMinimalVocabulary) {
  auto v = LoadBytes(GgufVocab([](auto& b) { b.AddUint32("tokenizer.ggml.bos_token_id", 4); }));
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->token_bytes[3], " ");  // byte-level Ġ
  EXPECT_EQ(v->bos_id, 4u);
  auto tok = Tokenizer::Create(*std::move(v));
  ASSERT_TRUE(tok.ok());
  EXPECT_THAT(*(*tok)->Encode("ab ab", {}), ::testing::ElementsAre(2, 3, 2));
  EXPECT_THAT(*(*tok)->Encode("<s>", {.allowed_special = {"<s>"}}), ::testing::ElementsAre(4));
}

std::vector<std::string> Pieces(const std::string& preset, std::string_view text) {
  const PretokenizerPreset* p = FindGgufPreset(preset);
  EXPECT_NE(p, nullptr) << preset;
  if (p == nullptr) return {};
  auto pre = Pretokenizer::Create(std::vector<std::string>(p->regexes.begin(), p->regexes.end()));
  EXPECT_TRUE(pre.ok()) << preset << ": " << pre.status();
  std::vector<std::string> out;
  (*pre)->ForEachPiece(text, [&](std::string_view piece) { out.emplace_back(piece); });
  return out;
}

// The tokenizer.ggml.pre names llama.cpp maps for Llama 3/4, Qwen 2/2.5/3,
// Phi, Mistral (Tekken) and the rest, with their pre-type's regexes.
TEST(GgufVocabLoaderTest, KnowsTheCommonPretokenizerNames) {
  using ::testing::ElementsAre;
  for (const char* name : {"llama3", "llama-bpe", "llama-v3", "pixtral", "lfm2", "midm-2.0"}) {
    EXPECT_THAT(Pieces(name, "12345 it's"), ElementsAre("123", "45", " it", "'s")) << name;
    EXPECT_TRUE(FindGgufPreset(name)->ignore_merges);
  }
  for (const char* name : {"qwen2", "deepseek-r1-qwen", "megrez", "kormo", "f2llmv2"}) {
    EXPECT_THAT(Pieces(name, "12345 it's"), ElementsAre("1", "2", "3", "4", "5", " it", "'s"))
        << name;
    EXPECT_FALSE(FindGgufPreset(name)->ignore_merges);
  }
  // qwen35 keeps combining marks with their letters.
  EXPECT_THAT(Pieces("qwen35", "e\xCC\x81x 12"), ElementsAre("e\xCC\x81x", " ", "1", "2"));
  EXPECT_THAT(Pieces("qwen2", "e\xCC\x81x"), ElementsAre("e", "\xCC\x81x"));
  // Tekken and gpt-4o split a word before an upper-case letter.
  EXPECT_THAT(Pieces("tekken", "HelloWorld 12345"),
              ElementsAre("Hello", "World", " ", "1", "2", "3", "4", "5"));
  for (const char* name : {"gpt-4o", "llama4"}) {
    EXPECT_THAT(Pieces(name, "HelloWorld it's 12345"),
                ElementsAre("Hello", "World", " it's", " ", "123", "45"))
        << name;
  }
  EXPECT_TRUE(FindGgufPreset("tekken")->ignore_merges);
  EXPECT_THAT(Pieces("phi-2", "it's 12"), ElementsAre("it", "'s", " 12"));
}

TEST(GgufVocabLoaderTest, RejectsInconsistentFiles) {
  auto expect = [](const std::string& bytes, const std::string& needle) {
    auto v = LoadBytes(bytes);
    ASSERT_FALSE(v.ok());
    EXPECT_THAT(v.status().message(), HasSubstr(needle));
    EXPECT_THAT(v.status().message(), HasSubstr("vocab.gguf"));
  };
  expect(GgufVocab(nullptr, true, "bert"), "not supported");
  {
    gguf::testing::GgufBuilder b;
    b.AddString("tokenizer.ggml.model", "gpt2");
    expect(b.Serialize(), "tokenizer.ggml.tokens");
  }
  {
    gguf::testing::GgufBuilder b;
    b.AddString("tokenizer.ggml.model", "gpt2");
    b.AddStringArray("tokenizer.ggml.tokens", {"a", "b"});
    b.AddInt32Array("tokenizer.ggml.token_type", {1});
    b.AddStringArray("tokenizer.ggml.merges", {"a b"});
    expect(b.Serialize(), "1 entries for 2 tokens");
  }
  {
    gguf::testing::GgufBuilder b;
    b.AddString("tokenizer.ggml.model", "gpt2");
    b.AddStringArray("tokenizer.ggml.tokens", {"a", "b"});
    b.AddInt32Array("tokenizer.ggml.token_type", {1, 9});
    b.AddStringArray("tokenizer.ggml.merges", {"a b"});
    expect(b.Serialize(), "unknown type 9");
  }
  {
    // A token_type array of the wrong element type (llama.cpp read UINT8
    // arrays as int32 and overflowed).
    gguf::testing::GgufBuilder b;
    b.AddString("tokenizer.ggml.model", "gpt2");
    b.AddStringArray("tokenizer.ggml.tokens", {"a", "b"});
    b.AddFloat32Array("tokenizer.ggml.token_type", {1, 1});
    b.AddStringArray("tokenizer.ggml.merges", {"a b"});
    expect(b.Serialize(), "tokenizer.ggml.token_type");
  }
  {
    gguf::testing::GgufBuilder b;
    b.AddString("tokenizer.ggml.model", "gpt2");
    b.AddStringArray("tokenizer.ggml.tokens", {"a", "b"});
    b.AddStringArray("tokenizer.ggml.merges", {"ab"});
    expect(b.Serialize(), "entry 0 has no space");
  }
  expect(GgufVocab([](auto& b) { b.AddUint32("tokenizer.ggml.eos_token_id", 1u << 30); }),
         "out of range");
  {
    gguf::testing::GgufBuilder b;
    b.AddString("tokenizer.ggml.model", "gpt2");
    b.AddString("tokenizer.ggml.pre", "no-such-pre");
    b.AddStringArray("tokenizer.ggml.tokens", {"a"});
    b.AddStringArray("tokenizer.ggml.merges", {});
    expect(b.Serialize(), "unknown pre-tokenizer 'no-such-pre'");
  }
  {
    gguf::testing::GgufBuilder b;
    b.AddString("tokenizer.ggml.model", "gpt2");
    b.AddStringArray("tokenizer.ggml.tokens", {"a", "<0xZZ>"});
    b.AddInt32Array("tokenizer.ggml.token_type", {1, 6});
    b.AddStringArray("tokenizer.ggml.merges", {});
    expect(b.Serialize(), "<0xNN>");
  }
}

// Issue 17, item 10: files whose parts do not agree are load errors.
absl::Status LoadError(const std::vector<std::string>& tokens, const std::vector<int32_t>& types,
                       const std::vector<std::string>& merges,
                       const std::function<void(gguf::testing::GgufBuilder&)>& extra = nullptr) {
  gguf::testing::GgufBuilder b;
  b.AddString("tokenizer.ggml.model", "gpt2");
  b.AddString("tokenizer.ggml.pre", "gpt-2");
  b.AddStringArray("tokenizer.ggml.tokens", tokens);
  b.AddInt32Array("tokenizer.ggml.token_type", types);
  b.AddStringArray("tokenizer.ggml.merges", merges);
  if (extra) extra(b);
  return LoadBytes(b.Serialize()).status();
}

TEST(GgufVocabLoaderTest, RejectsDuplicateTokenTextsNamingBothIds) {
  const absl::Status normal = LoadError({"a", "b", "ab", "b", "<s>"}, {1, 1, 1, 1, 3}, {"a b"});
  EXPECT_EQ(normal.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(normal.message(), HasSubstr("vocab.gguf: tokenizer.ggml.tokens: entries 1 and 3 "
                                          "are the same token 'b'"));
  // Any two tokens, whatever their types, as in llama.cpp.
  EXPECT_THAT(LoadError({"a", "b", "ab", "<s>", "<s>"}, {1, 1, 1, 3, 4}, {"a b"}).message(),
              HasSubstr("entries 3 and 4 are the same token '<s>'"));
  EXPECT_THAT(LoadError({"a", "b", "ab", "a"}, {1, 1, 1, 3}, {"a b"}).message(),
              HasSubstr("entries 0 and 3 are the same token 'a'"));
  // Empty texts are no token's text (llama.cpp renames them): they may repeat,
  // and no merge can name one.
  EXPECT_TRUE(LoadError({"a", "b", "ab", "", ""}, {1, 1, 1, 1, 5}, {"a b"}).ok());
  EXPECT_THAT(LoadError({"a", "b", "ab", ""}, {1, 1, 1, 1}, {"a b", "a "}).message(),
              HasSubstr("entry 1 'a ' names '', which is not a token"));
}

TEST(GgufVocabLoaderTest, RejectsMergesOfUnknownTokensOrWithoutAResultToken) {
  const absl::Status left = LoadError({"a", "b", "ab"}, {1, 1, 1}, {"a b", "x b"});
  EXPECT_EQ(left.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(left.message(), HasSubstr("vocab.gguf: tokenizer.ggml.merges: entry 1 'x b' names "
                                        "'x', which is not a token"));
  EXPECT_THAT(LoadError({"a", "b", "ab"}, {1, 1, 1}, {"a y"}).message(),
              HasSubstr("entry 0 'a y' names 'y', which is not a token"));
  EXPECT_THAT(LoadError({"a", "b", "ab"}, {1, 1, 1}, {"a b", "b a"}).message(),
              HasSubstr("entry 1 'b a' makes 'ba', which is not a token"));
}

TEST(GgufVocabLoaderTest, RejectsFewerOrMoreTokensThanTheModelHasRows) {
  const std::vector<std::string> tokens = {"a", "b", "ab", "<s>"};
  const std::vector<int32_t> types = {1, 1, 1, 3};
  const auto embedding = [](int64_t rows, const char* name = "token_embd.weight") {
    return [=](gguf::testing::GgufBuilder& b) {
      b.AddTensor(name, gguf::TensorType::kF32, {8, rows});
    };
  };
  EXPECT_TRUE(LoadError(tokens, types, {"a b"}, embedding(4)).ok());
  const absl::Status fewer = LoadError(tokens, types, {"a b"}, embedding(6));
  EXPECT_EQ(fewer.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(fewer.message(), HasSubstr("vocab.gguf: tokenizer.ggml.tokens: 4 tokens, but the "
                                         "model's token_embd.weight has 6 rows"));
  EXPECT_THAT(LoadError(tokens, types, {"a b"}, embedding(3)).message(),
              HasSubstr("4 tokens, but the model's token_embd.weight has 3 rows"));
  // The output matrix too (a model whose output is not tied to the embedding).
  EXPECT_THAT(LoadError(tokens, types, {"a b"},
                        [&](gguf::testing::GgufBuilder& b) {
                          embedding(4)(b);
                          embedding(5, "output.weight")(b);
                        })
                  .message(),
              HasSubstr("4 tokens, but the model's output.weight has 5 rows"));
}

TEST(GgufVocabLoaderTest, EosOutOfTheVocabularyIsRejectedAtCreate) {
  auto v = LoadBytes(GgufVocab([](auto& b) { b.AddUint32("tokenizer.ggml.eos_token_id", 99); }));
  ASSERT_TRUE(v.ok());
  auto tok = Tokenizer::Create(*std::move(v));
  ASSERT_FALSE(tok.ok());
  EXPECT_THAT(tok.status().message(), HasSubstr("eos token id 99"));
}

}  // namespace
}  // namespace llm::tok
