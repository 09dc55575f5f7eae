// GPT-2's byte-to-unicode table ("byte-level BPE"): every byte maps to a
// printable code point, so a byte string becomes a valid UTF-8 string. GGUF
// vocabularies of tokenizer model "gpt2" store normal tokens in this form.
#ifndef LLM_TOKENIZER_SVC_BYTE_LEVEL_H_
#define LLM_TOKENIZER_SVC_BYTE_LEVEL_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace llm::tok {

// The code point that byte `b` maps to.
uint32_t ByteToCodePoint(uint8_t b);

// Byte-level text to raw bytes. Code points outside the table are copied as
// their UTF-8 bytes (llama.cpp does the same); `*exact` is set to false when
// that happened.
std::string ByteLevelDecode(std::string_view text, bool* exact = nullptr);

// Raw bytes to byte-level text.
std::string ByteLevelEncode(std::string_view bytes);

}  // namespace llm::tok

#endif  // LLM_TOKENIZER_SVC_BYTE_LEVEL_H_
