// The Jinja lexer: template source -> tokens (text between tags, tag
// delimiters, and the expression tokens inside tags).
//
// Whitespace is handled as Hugging Face transformers' environment does
// (jinja2 with trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=
// False): newlines are normalized to "\n" and one trailing newline of the
// source is dropped; "{%-" / "{{-" / "{#-" strip all whitespace before the tag
// and "-%}" / "-}}" / "-#}" all whitespace after it; the first newline after
// a block or comment tag is dropped (trim_blocks) unless it ends in "+%}";
// spaces and tabs between a line's start and a block or comment tag are
// dropped (lstrip_blocks) unless it starts with "{%+". Comments produce no
// token. Inside a tag, the closing delimiter counts only outside brackets,
// as in jinja2 ({{ {'a': 1} }}).
//
// Errors: InvalidArgument "line L, column C: ..." for an unterminated tag,
// comment or string, or a character that starts no token.
// Cost: linear in the source. Threads: a pure function.
#ifndef LLM_COMMON_JINJA_LEXER_H_
#define LLM_COMMON_JINJA_LEXER_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace llm::jinja {

struct Token {
  enum class Kind {
    kText,       // template data, already whitespace-processed
    kExprBegin,  // {{
    kExprEnd,    // }}
    kStmtBegin,  // {%
    kStmtEnd,    // %}
    kName,       // identifiers and keywords
    kString,     // a string literal, escapes resolved
    kInt,        // text: the digits (underscores removed)
    kFloat,      // text: the literal
    kOperator,   // text: + - * / // % ** ~ == != < <= > >= = ( ) [ ] { } , . : |
    kEnd,        // end of the source
  };
  Kind kind;
  std::string text;
  int line = 1;
  int column = 1;
};

absl::StatusOr<std::vector<Token>> Tokenize(std::string_view source);

}  // namespace llm::jinja

#endif  // LLM_COMMON_JINJA_LEXER_H_
