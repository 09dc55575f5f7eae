// Valid UTF-8 for the text the client hands to its callers.
#ifndef LLM_CLIENT_GENERATE_UTF8_TEXT_H_
#define LLM_CLIENT_GENERATE_UTF8_TEXT_H_

#include <string>
#include <string_view>

namespace llm::client {

// Whether `s` is well-formed UTF-8 (no overlongs, surrogates or code points
// above U+10FFFF).
bool IsValidUtf8(std::string_view s);

// `s` with every ill-formed sequence (each maximal invalid subpart, as
// Unicode's "U+FFFD substitution of maximal subparts" says) replaced by
// U+FFFD. Returns `s` unchanged when it is valid.
std::string SanitizeUtf8(std::string_view s);

// Length of the longest prefix of `s` that does not end inside an incomplete
// (but so far well-formed) multi-byte sequence: the rest, at most 3 bytes,
// may still become a character. Ill-formed bytes count as complete (they are
// released, as U+FFFD after SanitizeUtf8, rather than held forever).
size_t CompleteUtf8Prefix(std::string_view s);

}  // namespace llm::client

#endif  // LLM_CLIENT_GENERATE_UTF8_TEXT_H_
