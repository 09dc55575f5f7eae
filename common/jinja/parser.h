// The Jinja parser: tokens (lexer.h) -> syntax tree (ast.h).
//
// Statements: if/elif/else, for (tuple targets, "if" filter, else), set
// (names, tuples, namespace attributes, block set), break/continue, macro,
// transformers' generation block (rendered as it is), comments. Expressions: literals (strings,
// numbers, true/false/none, lists, tuples, dicts), names, attributes, subscripts and slices, calls
// with keyword arguments, filters, tests ("is [not] name"), unary -, not, and/or, comparisons (==,
// !=, <, <=, >, >=, in, not in), + - * / // % ** ~, and the conditional expression; precedence as
// in jinja2.
//
// Not supported, each a parse error naming it: include, import, extends,
// from, block, call, filter blocks, raw, recursive loops. Errors are
// InvalidArgument "line L, column C: ..."; nesting deeper than max_depth
// (brackets, operators, blocks) is one of them, so a hostile template cannot
// overflow the stack.
// Threads: a pure function. Cost: linear in the tokens.
#ifndef LLM_COMMON_JINJA_PARSER_H_
#define LLM_COMMON_JINJA_PARSER_H_

#include <vector>

#include "absl/status/statusor.h"
#include "common/jinja/ast.h"
#include "common/jinja/lexer.h"

namespace llm::jinja {

absl::StatusOr<Body> Parse(const std::vector<Token>& tokens, int max_depth);

}  // namespace llm::jinja

#endif  // LLM_COMMON_JINJA_PARSER_H_
