// Encode/decode of arbitrary bytes with two real vocabularies (a .tiktoken and
// a GGUF one with user-defined tokens): never a crash, and Decode(Encode(x)),
// whole or incremental, gives x back byte for byte whenever every byte of x has
// a token. MPT's vocabulary lacks bytes that never occur in UTF-8, such as
// 0xFF, and has neither byte tokens nor an unknown token (its unknown_token_id
// is the control token <|endoftext|>): text with such a byte is
// InvalidArgument, and only such text.
//
// Bit 3 of the first byte switches to two small SentencePiece vocabularies
// built here (bit 0 picks one): one with all 256 byte tokens and the space
// prefix (DecodeText gives x; Decode and the incremental decoder " " + x), one
// without byte tokens, with <unk>, user-defined tokens and no prefix (lossy
// where a byte has no token of its own; else the pieces are x). Text with
// U+2581, which SentencePiece reads as a space, or invalid UTF-8 (see below)
// is not compared.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "common/gguf/gguf.h"
#include "common/utf8.h"
#include "tokenizer_svc/fuzz/fuzz_vocab.h"
#include "tokenizer_svc/gguf_vocab_loader.h"
#include "tokenizer_svc/incremental_decoder.h"
#include "tokenizer_svc/testing/spm_vocab.h"

namespace {

using llm::tok::Tokenizer;
using llm::tok::testing::SpmToken;

const Tokenizer& SpmOnce(bool bytes_and_prefix) {
  const std::string s = llm::tok::testing::kSpace;
  std::vector<SpmToken> pieces = {{s, -1},     {"a", -2},     {"b", -3},        {"c", -4},
                                  {"ab", -5},  {"bc", -5},    {s + "a", -6},    {s + "ab", -7},
                                  {"abc", -8}, {"<", -9},     {"s", -10},       {">", -11},
                                  {"<s", -12}, {s + s, -2},   {"\xC3\xA9", -3}, {"a\xC3\xA9", -4},
                                  {"\n", -5},  {s + "\n", -6}};
  if (!bytes_and_prefix) {
    pieces.push_back({"<tag>", 0, 4});
    pieces.push_back({"\n\n", 0, 4});
  }
  auto file = llm::gguf::File::FromBytes(
      llm::tok::testing::SpmGguf(llm::tok::testing::SpmTokens(pieces, bytes_and_prefix),
                                 bytes_and_prefix),
      "spm.gguf");
  if (!file.ok()) std::abort();
  auto vocab = llm::tok::VocabFromGguf(**file, std::nullopt);
  if (!vocab.ok()) std::abort();
  auto tok = Tokenizer::Create(*std::move(vocab));
  if (!tok.ok()) std::abort();
  return *tok->release();
}

bool ValidUtf8(std::string_view text) {
  for (size_t pos = 0, len = 0; pos < text.size(); pos += len) {
    if (llm::DecodeUtf8(text, pos, &len) < 0) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace llm::tok;
  static const Tokenizer& tiktoken = fuzz::LoadOnce("tokenizer/cl100k_base.tiktoken");
  static const Tokenizer& gguf = fuzz::LoadOnce("conformance/llama-vocab/ggml-vocab-mpt.gguf");
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  static const Tokenizer& spm_prefix = SpmOnce(true);
  static const Tokenizer& spm_plain = SpmOnce(false);
  const bool spm = (mode & 8) != 0;
  const Tokenizer& tok = spm ? ((mode & 1) ? spm_plain : spm_prefix) : (mode & 1) ? gguf : tiktoken;
  EncodeOptions options;
  options.allow_all_special = (mode & 2) != 0;
  options.algorithm = (mode & 4) ? Algorithm::kLongestMatch : Algorithm::kBpe;
  auto ids = tok.Encode(text, options);
  bool lossless = true;
  for (char c : text) lossless = lossless && tok.HasByteToken(static_cast<uint8_t>(c));
  if (!ids.ok()) {
    // Only text holding a byte without a token may fail, and only so.
    if (lossless || ids.status().code() != absl::StatusCode::kInvalidArgument) __builtin_trap();
    return 0;
  }
  auto back = tok.DecodeText(*ids);
  if (!back.ok()) __builtin_trap();
  if (!lossless) return 0;
  // With special tokens allowed, SentencePiece puts a space after each; U+2581
  // in the text is a space to it; and an invalid lead byte takes the next
  // bytes into its character, even a space's U+2581, which then falls back
  // to bytes and decodes as U+2581. All as in llama.cpp.
  if (spm &&
      (options.allow_all_special || text.find("\xE2\x96\x81") != text.npos || !ValidUtf8(text))) {
    return 0;
  }
  if (*back != text) __builtin_trap();
  const std::string pieces =
      std::string(tok.vocab().add_space_prefix && !text.empty() ? " " : "") + std::string(text);
  IncrementalDecoder dec(tok);
  std::string streamed;
  for (uint32_t id : *ids) {
    if (!dec.Add({&id, 1}, &streamed).ok()) __builtin_trap();
  }
  streamed += dec.Flush();
  if (streamed != pieces) __builtin_trap();
  return 0;
}
