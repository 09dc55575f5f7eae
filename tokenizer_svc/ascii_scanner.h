// AsciiScanner: a hand-written matcher for the pre-tokenizer patterns of
// cl100k_base and o200k_base (recognized by their exact regex text), used in
// front of PCRE2.
//
// At a position in the text it returns the length of the match PCRE2 would
// find there, when that match is decided by ASCII characters alone: every
// byte it inspects, including the one after the match that ends a greedy run
// or answers a lookahead, is below 0x80. Otherwise it returns 0 ("don't
// know") and the caller asks PCRE2 at that position. Since neither pattern
// looks behind, a match depends only on the text from its start, so mixing
// the two per match gives exactly PCRE2's pieces; ascii_scanner_test.cc checks
// this differentially on the conformance texts and random text.
// Threads: stateless. Cost: O(match length), no allocation.
#ifndef LLM_TOKENIZER_SVC_ASCII_SCANNER_H_
#define LLM_TOKENIZER_SVC_ASCII_SCANNER_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace llm::tok {

// Length of the match at text[pos] (pos < text.size()), or 0: ask PCRE2.
using AsciiMatcher = size_t (*)(std::string_view text, size_t pos);

// The matcher for `regex`, or nullptr when it is not one of the two patterns.
AsciiMatcher FindAsciiMatcher(std::string_view regex);

}  // namespace llm::tok

#endif  // LLM_TOKENIZER_SVC_ASCII_SCANNER_H_
