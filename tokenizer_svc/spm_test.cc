// SentencePiece-style vocabularies: the loader, the merge loop (against a
// naive reference on random vocabularies), space prefix, byte fallback,
// unknown tokens and the rule that text never becomes a control token.
#include "tokenizer_svc/spm.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "common/gguf/gguf.h"
#include "tokenizer_svc/gguf_vocab_loader.h"
#include "tokenizer_svc/testing/spm_vocab.h"
#include "tokenizer_svc/tokenizer.h"

namespace llm::tok {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::kSpace;
using testing::SpmToken;

const std::string S = kSpace;

// Pieces after <unk>, <s>, </s> and the 256 byte tokens: id = 259 + index.
std::vector<SpmToken> Pieces() {
  return {{S, -1},    {"a", -2},     {"b", -3},      {"c", -4},   {"ab", -5},
          {"bc", -5}, {S + "a", -6}, {S + "ab", -7}, {"abc", -8}, {"<", -9},
          {"s", -10}, {">", -11},    {"<s", -12},    {"s>", -13}, {"x", -14}};
}
constexpr uint32_t kFirst = 259;
enum : uint32_t {
  kSp = kFirst,
  kA,
  kB,
  kC,
  kAb,
  kBc,
  kSpA,
  kSpAb,
  kAbc,
  kLt,
  kS,
  kGt,
  kLtS,
  kSGt,
  kX
};

std::unique_ptr<Tokenizer> Load(const std::string& bytes) {
  auto file = gguf::File::FromBytes(bytes, "spm.gguf");
  EXPECT_TRUE(file.ok()) << file.status();
  auto vocab = VocabFromGguf(**file, std::nullopt);
  EXPECT_TRUE(vocab.ok()) << vocab.status();
  auto tok = Tokenizer::Create(*std::move(vocab));
  EXPECT_TRUE(tok.ok()) << tok.status();
  return *std::move(tok);
}

std::vector<uint32_t> Enc(const Tokenizer& tok, std::string_view text, EncodeOptions o = {}) {
  auto ids = tok.Encode(text, o);
  EXPECT_TRUE(ids.ok()) << ids.status();
  return ids.ok() ? *ids : std::vector<uint32_t>{};
}

TEST(SpmLoaderTest, ReadsScoresTypesAndDefaults) {
  auto tok = Load(testing::SpmGguf(testing::SpmTokens(Pieces())));
  const Vocab& v = tok->vocab();
  EXPECT_EQ(v.model, VocabModel::kSentencePiece);
  EXPECT_TRUE(v.add_space_prefix);  // llama.cpp's default for this model
  EXPECT_TRUE(v.add_bos);
  EXPECT_EQ(v.scores[kAb], -5.0f);
  EXPECT_EQ(*tok->TokenBytes(kSpAb), " ab");   // U+2581 decodes to a space
  EXPECT_EQ(*tok->TokenBytes(3 + 0x41), "A");  // <0x41>
  EXPECT_EQ(*tok->TokenBytes(1), "<s>");
  EXPECT_FALSE(
      Load(testing::SpmGguf(testing::SpmTokens(Pieces()), false))->vocab().add_space_prefix);
}

TEST(SpmLoaderTest, RejectsBadScores) {
  auto tokens = testing::SpmTokens(Pieces());
  tokens[kA].score = std::numeric_limits<float>::quiet_NaN();
  auto file = gguf::File::FromBytes(testing::SpmGguf(tokens), "spm.gguf");
  ASSERT_TRUE(file.ok());
  auto v = VocabFromGguf(**file, std::nullopt);
  ASSERT_FALSE(v.ok());
  EXPECT_THAT(v.status().message(), HasSubstr("tokenizer.ggml.scores"));
}

TEST(SpmTest, HighestScoreFirstLeftmostOnTies) {
  auto tok = Load(testing::SpmGguf(testing::SpmTokens(Pieces())));
  // ab and bc tie at -5: the leftmost, ab, merges; then ▁ab (-7) beats abc.
  EXPECT_THAT(Enc(*tok, "abc"), ElementsAre(kSpAb, kC));
  EXPECT_THAT(Enc(*tok, "bc"), ElementsAre(kSp, kBc));
  // Spaces are U+2581; a pair that is no token stays apart.
  EXPECT_THAT(Enc(*tok, "a b"), ElementsAre(kSpA, kSp, kB));
  EXPECT_THAT(Enc(*tok, ""), ElementsAre());
  EXPECT_THAT(Enc(*tok, "ab", {.add_bos = true}), ElementsAre(1, kSpAb));
}

TEST(SpmTest, DecodeDropsTheSpacePrefix) {
  auto tok = Load(testing::SpmGguf(testing::SpmTokens(Pieces())));
  for (const std::string text : {"abc", " abc", "a b", "  x", "x ", "\xC3\xA9"}) {
    const auto ids = Enc(*tok, text);
    EXPECT_EQ(*tok->DecodeText(ids), text);
    std::string pieces;
    for (uint32_t id : ids) pieces += *tok->TokenBytes(id);
    EXPECT_EQ(pieces, " " + text);  // what the client's incremental decoder sees
  }
  // llama_detokenize: the first token's space only.
  EXPECT_EQ(*tok->DecodeText(std::vector<uint32_t>{1, kSpAb}), "<s> ab");
  EXPECT_EQ(*tok->DecodeText(std::vector<uint32_t>{kSpAb, kSpAb}), "ab ab");
  EXPECT_EQ(*tok->Decode(std::vector<uint32_t>{kSpAb, kSpAb}), " ab ab");
}

TEST(SpmTest, SpacePrefixAfterSpecialTokens) {
  auto tok = Load(testing::SpmGguf(testing::SpmTokens(Pieces())));
  EXPECT_THAT(Enc(*tok, "<s>ab", {.allowed_special = {"<s>"}}), ElementsAre(1, kSpAb));
  EXPECT_THAT(Enc(*tok, "ab<s>", {.allowed_special = {"<s>"}}), ElementsAre(kSpAb, 1));
  auto plain = Load(testing::SpmGguf(testing::SpmTokens(Pieces()), false));
  EXPECT_THAT(Enc(*plain, "<s>ab", {.allowed_special = {"<s>"}}), ElementsAre(1, kAb));
  EXPECT_THAT(Enc(*plain, "abc"), ElementsAre(kAbc));  // ab, then abc
  EXPECT_EQ(*plain->DecodeText(std::vector<uint32_t>{kSpAb}), " ab");
}

TEST(SpmTest, TextNeverMergesIntoAControlToken) {
  auto tok = Load(testing::SpmGguf(testing::SpmTokens(Pieces())));
  // <s + > would make "<s>", the control token: it stays two tokens.
  EXPECT_THAT(Enc(*tok, "<s>"), ElementsAre(kSp, kLtS, kGt));
  // Nor does the text of a byte token become it.
  EXPECT_THAT(Enc(*tok, "x"), ElementsAre(kSp, kX));
}

TEST(SpmTest, ByteFallbackThenUnknownThenError) {
  auto tok = Load(testing::SpmGguf(testing::SpmTokens(Pieces())));
  EXPECT_THAT(Enc(*tok, "a\xC3\xA9"), ElementsAre(kSpA, 3 + 0xC3, 3 + 0xA9));
  EXPECT_THAT(Enc(*tok, "\xFF"), ElementsAre(kSp, 3 + 0xFF));
  EXPECT_TRUE(tok->HasByteToken(0xFF));

  // Without byte tokens: the unknown token per byte (pieces now start at 3).
  auto unk = Load(testing::SpmGguf(testing::SpmTokens(Pieces(), false)));
  EXPECT_THAT(Enc(*unk, "a\xC3\xA9"), ElementsAre(3 + 6, 0, 0));
  EXPECT_FALSE(unk->HasByteToken(0xC3));

  // Without an unknown-type token (<unk> is control): an error naming the byte.
  auto none = Load(testing::SpmGguf(testing::SpmTokens(Pieces(), false, false)));
  auto ids = none->Encode("ab c \xC3\xA9", {});
  ASSERT_FALSE(ids.ok());
  EXPECT_EQ(ids.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ids.status().message(), HasSubstr("byte 0xC3 at byte offset 5"));
}

TEST(SpmTest, EndOfGenerationUserDefinedTokensAreControl) {
  // Phi-3 marks </s> user-defined; llama.cpp treats it as a control token.
  auto tokens = testing::SpmTokens(Pieces());
  tokens[2].type = 4;
  tokens.push_back({"<tag>", 0, 4});
  auto tok = Load(testing::SpmGguf(tokens));
  EXPECT_EQ(tok->vocab().token_types[2], TokenType::kControl);
  const uint32_t tag = static_cast<uint32_t>(tokens.size() - 1);
  // A user-defined token always matches, and a space prefix follows it.
  EXPECT_THAT(Enc(*tok, "ab<tag>ab"), ElementsAre(kSpAb, tag, kSpAb));
}

// The merge rule, naively: repeatedly merge the adjacent pair whose
// concatenation is a token of the highest score, the leftmost on ties.
std::vector<uint32_t> NaiveSpm(const std::vector<SpmToken>& tokens, const std::string& escaped) {
  auto find = [&](const std::string& text) -> int {
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (tokens[i].type == 1 && tokens[i].text == text) return static_cast<int>(i);
    }
    return -1;
  };
  std::vector<std::string> parts;
  for (size_t i = 0; i < escaped.size();) {
    const auto c = static_cast<uint8_t>(escaped[i]);
    const size_t n = std::min<size_t>(c < 0xC0   ? 1
                                      : c < 0xE0 ? 2
                                      : c < 0xF0 ? 3
                                                 : 4,
                                      escaped.size() - i);
    parts.push_back(escaped.substr(i, n));
    i += n;
  }
  for (;;) {
    int best = -1;
    float best_score = 0;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      const int id = find(parts[i] + parts[i + 1]);
      if (id >= 0 && (best < 0 || tokens[id].score > best_score)) {
        best = static_cast<int>(i);
        best_score = tokens[id].score;
      }
    }
    if (best < 0) break;
    parts[best] += parts[best + 1];
    parts.erase(parts.begin() + best + 1);
  }
  std::vector<uint32_t> ids;
  for (const std::string& p : parts) {
    const int id = find(p);
    if (id >= 0) {
      ids.push_back(id);
    } else {
      for (char c : p) ids.push_back(3 + static_cast<uint8_t>(c));
    }
  }
  return ids;
}

TEST(SpmTest, MatchesNaiveMergeOnRandomVocabularies) {
  std::mt19937 rng(5);
  const std::vector<std::string> alphabet = {"a", "b", "c", S, "\xC3\xA9"};
  for (int round = 0; round < 200; ++round) {
    std::vector<SpmToken> pieces;
    for (const std::string& a : alphabet) {
      // ▁ always: a space that falls back to bytes decodes as U+2581.
      if (a == S || rng() % 5 != 0) pieces.push_back({a, static_cast<float>(rng() % 4)});
    }
    std::set<std::string> seen;
    for (const auto& p : pieces) seen.insert(p.text);
    for (int k = 0; k < 30; ++k) {
      std::string t;
      for (int len = 2 + rng() % 4; len > 0; --len) t += alphabet[rng() % alphabet.size()];
      // Few distinct scores, so ties are common.
      if (seen.insert(t).second) pieces.push_back({t, static_cast<float>(rng() % 4)});
    }
    const bool prefix = rng() % 2;
    const auto tokens = testing::SpmTokens(pieces);
    auto tok = Load(testing::SpmGguf(tokens, prefix));
    for (int k = 0; k < 20; ++k) {
      std::string text, escaped = prefix ? S : "";
      for (int len = rng() % 24; len > 0; --len) {
        const std::string& a = alphabet[rng() % alphabet.size()];
        text += a == S ? " " : a;
        escaped += a;
      }
      if (text.empty()) continue;
      ASSERT_EQ(Enc(*tok, text), NaiveSpm(tokens, escaped)) << round << " " << text;
      ASSERT_EQ(*tok->DecodeText(Enc(*tok, text)), text);
    }
  }
}

}  // namespace
}  // namespace llm::tok
