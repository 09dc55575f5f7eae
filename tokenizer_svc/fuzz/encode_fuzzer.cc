// Encode/decode of arbitrary bytes with two real vocabularies (a .tiktoken and
// a GGUF one with user-defined tokens): never a crash, and Decode(Encode(x)),
// whole or incremental, gives x back byte for byte whenever every byte of x has
// a token. MPT's vocabulary lacks bytes that never occur in UTF-8, such as
// 0xFF, and has neither byte tokens nor an unknown token (its unknown_token_id
// is the control token <|endoftext|>): text with such a byte is
// InvalidArgument, and only such text.
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "tokenizer_svc/fuzz/fuzz_vocab.h"
#include "tokenizer_svc/incremental_decoder.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace llm::tok;
  static const Tokenizer& tiktoken = fuzz::LoadOnce("tokenizer/cl100k_base.tiktoken");
  static const Tokenizer& gguf = fuzz::LoadOnce("conformance/llama-vocab/ggml-vocab-mpt.gguf");
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  const Tokenizer& tok = (mode & 1) ? gguf : tiktoken;
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
  auto back = tok.Decode(*ids);
  if (!back.ok()) __builtin_trap();
  if (!lossless) return 0;
  if (*back != text) __builtin_trap();
  IncrementalDecoder dec(tok);
  std::string streamed;
  for (uint32_t id : *ids) {
    if (!dec.Add({&id, 1}, &streamed).ok()) __builtin_trap();
  }
  streamed += dec.Flush();
  if (streamed != text) __builtin_trap();
  return 0;
}
