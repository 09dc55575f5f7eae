#include "tokenizer_svc/tokenizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/gguf/gguf_writer.h"
#include "common/test_paths.h"
#include "common/utf8.h"
#include "tokenizer_svc/gguf_vocab_loader.h"
#include "tokenizer_svc/incremental_decoder.h"

namespace llm::tok {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const Tokenizer& Cl100k() {
  static const Tokenizer* tok = [] {
    auto t = Tokenizer::Load({.path = testing::SharedDir() + "/tokenizer/cl100k_base.tiktoken"});
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? t->release() : nullptr;
  }();
  return *tok;
}

// A tiny vocabulary: the seed's "a", "ab", "abc", "b", plus the bytes 'c' and
// 'd', and optionally byte tokens / <unk>. Byte 'z' is never a token.
Vocab TinyVocab(bool byte_tokens, bool unk) {
  Vocab v;
  v.source = "tiny";
  v.format = "test";
  for (const char* t : {"a", "b", "c", "d", "ab", "abc", "bc"}) {
    v.token_bytes.emplace_back(t);
    v.token_types.push_back(TokenType::kNormal);
  }
  v.token_bytes.emplace_back("<|end|>");
  v.token_types.push_back(TokenType::kControl);
  if (byte_tokens) {
    v.token_bytes.emplace_back("z");
    v.token_types.push_back(TokenType::kByte);
  }
  if (unk) {
    v.token_bytes.emplace_back("<unk>");
    v.token_types.push_back(TokenType::kUnknown);
    v.unk_id = static_cast<uint32_t>(v.token_bytes.size() - 1);
  }
  v.pre_regexes = {};  // no pre-tokenization: the whole text is one piece
  return v;
}

TEST(TokenizerTest, SpecialTokensAreOrdinaryTextByDefault) {
  const Tokenizer& tok = Cl100k();
  auto ids = tok.Encode("a<|endoftext|>b", {});
  ASSERT_TRUE(ids.ok());
  EXPECT_GT(ids->size(), 3u);
  EXPECT_THAT(*ids, ::testing::Not(::testing::Contains(100257u)));
}

TEST(TokenizerTest, AllowedSpecialTokensAreRecognized) {
  const Tokenizer& tok = Cl100k();
  auto ids = tok.Encode("a<|endoftext|>b", {.allowed_special = {"<|endoftext|>"}});
  ASSERT_TRUE(ids.ok());
  EXPECT_THAT(*ids, ElementsAre(64, 100257, 65));
  auto all = tok.Encode("<|fim_prefix|>x<|endoftext|>", {.allow_all_special = true});
  ASSERT_TRUE(all.ok());
  EXPECT_THAT(*all, ElementsAre(100258, 87, 100257));
}

TEST(TokenizerTest, DisallowedSpecialTokenIsAnErrorNamingIt) {
  const Tokenizer& tok = Cl100k();
  auto ids = tok.Encode("hi <|fim_middle|>",
                        {.allowed_special = {"<|endoftext|>"}, .disallow_special = true});
  ASSERT_FALSE(ids.ok());
  EXPECT_EQ(ids.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ids.status().message(), HasSubstr("<|fim_middle|>"));
  // Allowed ones pass the check.
  EXPECT_TRUE(
      tok.Encode("<|endoftext|>", {.allowed_special = {"<|endoftext|>"}, .disallow_special = true})
          .ok());
  auto unknown = tok.Encode("x", {.allowed_special = {"<|nope|>"}});
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(TokenizerTest, LongestMatchIsNotBpe) {
  // The documented difference: 'LL is ["'", "LL"] in BPE, ["'L", "L"] greedily.
  const Tokenizer& tok = Cl100k();
  auto bpe = tok.Encode("'LL", {});
  auto greedy = tok.Encode("'LL", {.algorithm = Algorithm::kLongestMatch});
  ASSERT_TRUE(bpe.ok() && greedy.ok());
  EXPECT_THAT(*bpe, ElementsAre(6, 4178));
  EXPECT_THAT(*greedy, ElementsAre(92526, 43));
  // Both decode to the same text.
  EXPECT_EQ(*tok.Decode(*bpe), *tok.Decode(*greedy));
}

TEST(TokenizerTest, SeedExampleLongestMatch) {
  auto tok = Tokenizer::Create(TinyVocab(false, false));
  ASSERT_TRUE(tok.ok()) << tok.status();
  auto ids = (*tok)->Encode("abcb", {.algorithm = Algorithm::kLongestMatch});
  ASSERT_TRUE(ids.ok());
  EXPECT_THAT(*ids, ElementsAre(5, 1));  // "abc", "b"
  // BPE (concatenation rank) merges "ab" (rank 4) before "bc" (6), then "abc".
  auto bpe = (*tok)->Encode("abcb", {});
  ASSERT_TRUE(bpe.ok());
  EXPECT_THAT(*bpe, ElementsAre(5, 1));
  auto bcb = (*tok)->Encode("bcab", {});
  EXPECT_THAT(*bcb, ElementsAre(6, 4));
}

TEST(TokenizerTest, UnknownByteFallsBackToByteTokenThenUnkThenError) {
  auto with_bytes = Tokenizer::Create(TinyVocab(true, true));
  ASSERT_TRUE(with_bytes.ok());
  EXPECT_THAT(*(*with_bytes)->Encode("azb", {}), ElementsAre(0, 8, 1));
  auto with_unk = Tokenizer::Create(TinyVocab(false, true));
  ASSERT_TRUE(with_unk.ok());
  EXPECT_THAT(*(*with_unk)->Encode("azb", {}), ElementsAre(0, 8, 1));
  EXPECT_EQ((*with_unk)->vocab().token_bytes[8], "<unk>");
  auto neither = Tokenizer::Create(TinyVocab(false, false));
  ASSERT_TRUE(neither.ok());
  std::vector<uint32_t> ids = {42};
  absl::Status s = (*neither)->EncodeTo("azb", {}, &ids);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("byte 0x7A at byte offset 1 "));
  EXPECT_THAT(ids, ElementsAre(42));  // nothing appended on error
  // The first byte without a token is named, in both algorithms, whether it
  // is a piece of its own or part of a longer piece.
  for (const Algorithm algorithm : {Algorithm::kBpe, Algorithm::kLongestMatch}) {
    auto longer = (*neither)->Encode("abczzd", {.algorithm = algorithm});
    EXPECT_EQ(longer.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(longer.status().message(), HasSubstr("byte 0x7A at byte offset 3 "));
  }
}

// A unk_id that names a control token (as SmolLM2's and GPT-NeoX's GGUF files
// do: unknown_token_id = 0 = <|endoftext|>) is not an unknown token: ordinary
// text must never become a control token.
TEST(TokenizerTest, UnkIdOfAControlTokenIsNotUsedForUnknownBytes) {
  Vocab v = TinyVocab(false, false);
  v.unk_id = 7;  // <|end|>, a control token
  auto tok = Tokenizer::Create(std::move(v));
  ASSERT_TRUE(tok.ok()) << tok.status();
  for (const Algorithm algorithm : {Algorithm::kBpe, Algorithm::kLongestMatch}) {
    auto ids = (*tok)->Encode("abzb", {.algorithm = algorithm});
    ASSERT_FALSE(ids.ok()) << ::testing::PrintToString(*ids);
    EXPECT_EQ(ids.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(ids.status().message(), HasSubstr("byte 0x7A at byte offset 2 "));
  }
  // Allowing special tokens changes nothing: the byte is still not <|end|>.
  auto allowed = (*tok)->Encode("az", {.allow_all_special = true});
  EXPECT_EQ(allowed.status().code(), absl::StatusCode::kInvalidArgument);
  // The control token itself still matches where it is allowed.
  EXPECT_THAT(*(*tok)->Encode("a<|end|>", {.allow_all_special = true}), ElementsAre(0, 7));
  // A real unknown token is used even when unk_id names another token.
  Vocab with_unk = TinyVocab(false, true);
  with_unk.unk_id = 7;
  auto tok2 = Tokenizer::Create(std::move(with_unk));
  ASSERT_TRUE(tok2.ok());
  EXPECT_THAT(*(*tok2)->Encode("azb", {}), ElementsAre(0, 8, 1));
}

// Issue 17: with the SmolLM2 vocabulary, bytes 61 C0 80 62 gave
// [81, 0, 218, 82], 0 being <|endoftext|>. SmolLM2 has no byte tokens and no
// unknown token, so a byte without a token (C0, C1, F5-FF, and some control
// characters such as 0x04) is an error naming the byte and its offset.
TEST(TokenizerTest, SmolLM2BytesWithoutATokenAreAnErrorNotEndOfText) {
  const std::string path = testing::SourceDir() + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!std::filesystem::exists(path))
    GTEST_SKIP() << "missing " << path << " (scripts/fetch-model.sh)";
  auto tok = Tokenizer::Load({.path = path});
  ASSERT_TRUE(tok.ok()) << tok.status();
  for (const Algorithm algorithm : {Algorithm::kBpe, Algorithm::kLongestMatch}) {
    auto ids = (*tok)->Encode("\x61\xC0\x80\x62", {.algorithm = algorithm});
    ASSERT_FALSE(ids.ok()) << ::testing::PrintToString(*ids);
    EXPECT_EQ(ids.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(ids.status().message(), HasSubstr("byte 0xC0 at byte offset 1 "));
  }
  for (int b = 0xF5; b <= 0xFF; ++b) {
    const std::string text = std::string("ok ") + static_cast<char>(b);
    auto ids = (*tok)->Encode(text, {});
    ASSERT_FALSE(ids.ok()) << b;
    EXPECT_THAT(ids.status().message(),
                HasSubstr(absl::StrFormat("byte 0x%02X at byte offset 3 ", b)));
  }
  auto control = (*tok)->Encode("a\x04", {.allow_all_special = true});
  EXPECT_THAT(control.status().message(), HasSubstr("byte 0x04 at byte offset 1 "));
  // Bytes that have a token are unchanged.
  EXPECT_THAT(*(*tok)->Encode("\x61\x80\x62", {}), ElementsAre(81, 218, 82));
}

// A GGUF vocabulary with <0xNN> byte tokens still falls back to them.
TEST(TokenizerTest, GgufByteTokensAreTheFallback) {
  gguf::testing::GgufBuilder b;
  b.AddString("tokenizer.ggml.model", "gpt2");
  b.AddString("tokenizer.ggml.pre", "gpt-2");
  b.AddStringArray("tokenizer.ggml.tokens", {"a", "b", "ab", "<0xC0>", "<|endoftext|>"});
  b.AddInt32Array("tokenizer.ggml.token_type", {1, 1, 1, 6, 3});
  b.AddStringArray("tokenizer.ggml.merges", {"a b"});
  b.AddUint32("tokenizer.ggml.unknown_token_id", 4);
  auto file = gguf::File::FromBytes(b.Serialize(), "bytes.gguf");
  ASSERT_TRUE(file.ok()) << file.status();
  auto vocab = VocabFromGguf(**file, std::nullopt);
  ASSERT_TRUE(vocab.ok()) << vocab.status();
  auto tok = Tokenizer::Create(*std::move(vocab));
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_THAT(*(*tok)->Encode("ab\xC0"
                              "b",
                              {}),
              ElementsAre(2, 3, 1));
  EXPECT_THAT(*(*tok)->Encode("a\xC0", {.algorithm = Algorithm::kLongestMatch}), ElementsAre(0, 3));
  // A byte with neither: an error, not <|endoftext|>.
  auto none = (*tok)->Encode("a\xC1", {});
  EXPECT_THAT(none.status().message(), HasSubstr("byte 0xC1 at byte offset 1 "));
}

// The trie of normal tokens is built on the first longest-match call (BPE
// uses the token index and the pair table); threads that race to it agree.
TEST(TokenizerTest, LongestMatchFromManyThreadsOnAFreshTokenizer) {
  auto tok = Tokenizer::Load({.path = testing::SharedDir() + "/tokenizer/cl100k_base.tiktoken"});
  ASSERT_TRUE(tok.ok()) << tok.status();
  const std::string text = "'LL tokenization, longest match: 'LL";
  std::vector<std::vector<uint32_t>> got(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < got.size(); ++i) {
    threads.emplace_back(
        [&, i] { got[i] = *(*tok)->Encode(text, {.algorithm = Algorithm::kLongestMatch}); });
  }
  for (auto& t : threads) t.join();
  for (const auto& ids : got) EXPECT_EQ(ids, got[0]);
  EXPECT_THAT(std::vector<uint32_t>(got[0].begin(), got[0].begin() + 2), ElementsAre(92526, 43));
  EXPECT_EQ(*(*tok)->Decode(got[0]), text);
}

// A token longer than the token index takes (255 bytes): the trie does its
// work, built at load.
TEST(TokenizerTest, VocabularyWithAVeryLongToken) {
  Vocab v = TinyVocab(false, false);
  const std::string long_token(300, 'a');
  v.token_bytes.push_back(long_token);
  v.token_types.push_back(TokenType::kNormal);
  v.token_bytes.emplace_back("aa");
  v.token_types.push_back(TokenType::kNormal);
  auto tok = Tokenizer::Create(std::move(v));
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_THAT(*(*tok)->Encode(long_token, {}), ElementsAre(8));  // the whole piece
  EXPECT_THAT(*(*tok)->Encode("aaab", {}), ElementsAre(9, 4));   // merges: aa, ab
  EXPECT_THAT(*(*tok)->Encode(long_token + "b", {.algorithm = Algorithm::kLongestMatch}),
              ElementsAre(8, 1));
}

TEST(TokenizerTest, InvalidUtf8IsTokenizedAsBytesAndRoundTrips) {
  const Tokenizer& tok = Cl100k();
  const std::string text = "ok \xFF\xFE caf\xC3 \xE4\xB8 end\x80";
  auto ids = tok.Encode(text, {});
  ASSERT_TRUE(ids.ok());
  auto back = tok.Decode(*ids);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, text);
}

TEST(TokenizerTest, DecodeRejectsOutOfRangeIdsAndHoles) {
  const Tokenizer& tok = Cl100k();
  auto out_of_range = tok.Decode(std::vector<uint32_t>{1, 100277});
  EXPECT_EQ(out_of_range.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out_of_range.status().message(), HasSubstr("100277"));
  auto hole = tok.Decode(std::vector<uint32_t>{100256});
  EXPECT_EQ(hole.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(TokenizerTest, AddBosNeedsABosToken) {
  auto ids = Cl100k().Encode("x", {.add_bos = true});
  EXPECT_EQ(ids.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(TokenizerTest, PathologicalInputsEncodeAndRoundTrip) {
  // 1 MB without whitespace: one piece for the pre-tokenizer; the heap path
  // keeps this O(n log n).
  const Tokenizer& tok = Cl100k();
  for (const std::string& text :
       {std::string(1 << 20, 'a'), std::string(300000, '7'), std::string(200000, '!')}) {
    auto ids = tok.Encode(text, {});
    ASSERT_TRUE(ids.ok());
    EXPECT_LT(ids->size(), text.size());
    EXPECT_EQ(*tok.Decode(*ids), text);
  }
}

// Text whose pieces repeat, of every cached size class: short words, pieces of
// 27..256 bytes (the long table) and longer (never cached).
std::string RepetitiveText() {
  std::mt19937 rng(3);
  std::string text;
  for (size_t len : {3, 12, 26, 27, 60, 127, 128, 256, 257, 700}) {
    std::string word;
    for (size_t i = 0; i < len; ++i) word += static_cast<char>('a' + rng() % 26);
    for (int rep = 0; rep < 3; ++rep) text += " the " + word + " " + word + "\n";
  }
  return text + "unbelievable unbelievable \xF0\x9F\x98\x80\xF0\x9F\x98\x80";
}

TEST(TokenizerTest, PieceCacheHitsEqualMisses) {
  const std::string text = RepetitiveText();
  const std::string o200k_path = testing::SharedDir() + "/tokenizer/o200k_base.tiktoken";
  auto other = Tokenizer::Load({.path = o200k_path});
  ASSERT_TRUE(other.ok()) << other.status();
  std::vector<std::vector<uint32_t>> runs;
  std::vector<uint32_t> other_first, other_again;
  // A fresh thread has an empty cache: the first pass misses on every first
  // occurrence, the second hits, the third follows another tokenizer's use of
  // the same thread's cache.
  std::thread t([&] {
    for (int i = 0; i < 3; ++i) {
      runs.push_back(*Cl100k().Encode(text, {}));
      if (i == 1) other_first = *(*other)->Encode(text, {});
    }
    other_again = *(*other)->Encode(text, {});
  });
  t.join();
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0], runs[1]);
  EXPECT_EQ(runs[0], runs[2]);
  EXPECT_EQ(other_first, other_again);
  EXPECT_NE(runs[0], other_first);
  EXPECT_EQ(*Cl100k().Decode(runs[0]), text);
  EXPECT_EQ(*(*other)->Decode(other_first), text);
}

TEST(TokenizerTest, EncodingWithoutThePieceCacheGivesTheSameIds) {
  const std::string text = RepetitiveText();
  const Tokenizer& tok = Cl100k();
  // Fill the cache, then compare with calls that bypass it, in both orders.
  const std::vector<uint32_t> cached = *tok.Encode(text, {});
  const std::vector<uint32_t> uncached = *tok.Encode(text, {.use_piece_cache = false});
  EXPECT_EQ(uncached, cached);
  EXPECT_EQ(*tok.Encode(text, {}), cached);
  EXPECT_EQ(*tok.Decode(uncached), text);
  std::thread t([&] {
    // A fresh thread's first call, with the cache off, then on.
    EXPECT_EQ(*tok.Encode(text, {.use_piece_cache = false}), cached);
    EXPECT_EQ(*tok.Encode(text, {}), cached);
  });
  t.join();
}

TEST(TokenizerTest, ConcurrentEncodesAgree) {
  const std::string text = RepetitiveText();
  const std::vector<uint32_t> want = *Cl100k().Encode(text, {});
  std::vector<std::vector<uint32_t>> got(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < got.size(); ++i) {
    threads.emplace_back([&, i] {
      for (int rep = 0; rep < 20; ++rep) got[i] = *Cl100k().Encode(text, {});
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& ids : got) EXPECT_EQ(ids, want);
}

TEST(TokenizerTest, UserDefinedTokensAreMatchedBeforePreTokenization) {
  const std::string path = testing::SharedDir() + "/conformance/llama-vocab/ggml-vocab-mpt.gguf";
  if (!std::filesystem::exists(path)) GTEST_SKIP();
  auto tok = Tokenizer::Load({.path = path});
  ASSERT_TRUE(tok.ok()) << tok.status();
  // Ids 50254..50276 are runs of 24 down to 2 spaces (user-defined).
  auto ids = (*tok)->Encode("a    b", {});
  ASSERT_TRUE(ids.ok());
  EXPECT_THAT(*ids, ::testing::Contains(50274u));  // 4 spaces
  EXPECT_EQ(*(*tok)->Decode(*ids), "a    b");
}

TEST(IncrementalDecoderTest, HoldsPartialCharactersAndFlushesTheRest) {
  const Tokenizer& tok = Cl100k();
  const std::string text = "中文🙂ok";
  auto ids = tok.Encode(text, {});
  ASSERT_TRUE(ids.ok());
  IncrementalDecoder dec(tok);
  std::string out;
  for (uint32_t id : *ids) {
    const size_t before = out.size();
    ASSERT_TRUE(dec.Add(std::vector<uint32_t>{id}, &out).ok());
    // Every delta is complete UTF-8.
    std::string delta = out.substr(before);
    EXPECT_EQ(CompleteUtf8Prefix(delta), delta.size());
  }
  out += dec.Flush();
  EXPECT_EQ(out, text);
  // A bad id leaves the decoder unchanged.
  std::string more;
  EXPECT_FALSE(dec.Add(std::vector<uint32_t>{999999}, &more).ok());
  EXPECT_TRUE(more.empty());
}

}  // namespace
}  // namespace llm::tok
