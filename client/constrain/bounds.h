// The cheap checks a constraint's text passes before xgrammar sees it: its
// nesting, which xgrammar's recursive parsers would follow down the stack.
// Each scan is linear, iterative, and over-counts rather than under-counts
// (a parenthesis inside a character class counts), so that a text it passes
// nests no deeper than the bound.
#ifndef LLM_CLIENT_CONSTRAIN_BOUNDS_H_
#define LLM_CLIENT_CONSTRAIN_BOUNDS_H_

#include <string_view>

#include "absl/status/status.h"

namespace llm::constrain {

// Arrays and objects of a JSON text, outside its strings. InvalidArgument
// naming the byte offset where the nesting passes `max`.
absl::Status CheckJsonNesting(std::string_view json, int max);

// Groups of a regular expression: unescaped '(' not yet closed.
absl::Status CheckRegexNesting(std::string_view regex, int max);

// Groups of a GBNF grammar: '(' outside "strings", [classes] and # comments.
absl::Status CheckGrammarNesting(std::string_view grammar, int max);

}  // namespace llm::constrain

#endif  // LLM_CLIENT_CONSTRAIN_BOUNDS_H_
