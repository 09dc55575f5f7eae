// Small UTF-8 helpers: the tokenizer (pre-tokenizer, loaders, decoders) and
// the chat-template engine use them.
#ifndef LLM_COMMON_UTF8_H_
#define LLM_COMMON_UTF8_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace llm {

// Appends the UTF-8 encoding of code point `cp` (must be <= 0x10FFFF).
void AppendUtf8(uint32_t cp, std::string& out);

// Decodes one code point at s[pos]. On success sets *len to its byte length and
// returns the code point; on an invalid or truncated sequence returns -1 and
// sets *len to 1.
int32_t DecodeUtf8(std::string_view s, size_t pos, size_t* len);

// Length of the longest prefix of `s` that does not end inside an incomplete
// (but so far valid) multi-byte sequence. Bytes that can never become valid
// UTF-8 are counted as complete, so they are emitted rather than held forever.
// The held-back tail is at most 3 bytes.
size_t CompleteUtf8Prefix(std::string_view s);

}  // namespace llm

#endif  // LLM_COMMON_UTF8_H_
