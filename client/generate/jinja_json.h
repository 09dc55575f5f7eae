// JSON text as the values a chat template sees: what Python's json.loads
// gives transformers' apply_chat_template (tool definitions, a tool call's
// arguments), as jinja::Value.
//
// Objects become dicts in the text's key order (a repeated key keeps its
// first place and its last value, as json.loads does), integers ints (one
// beyond int64: a float), other numbers floats, null None.
//
// Errors: InvalidArgument for text that is not one JSON value (RFC 8259,
// nothing but whitespace after it) or nests arrays and objects deeper than
// `max_depth`. Threads: a pure function. Cost: one pass, linear in the text
// (repeated keys found through a hash table); the stack does not grow with
// the nesting.
#ifndef LLM_CLIENT_GENERATE_JINJA_JSON_H_
#define LLM_CLIENT_GENERATE_JINJA_JSON_H_

#include <string_view>

#include "absl/status/statusor.h"
#include "common/jinja/value.h"

namespace llm::client {

inline constexpr int kMaxJinjaJsonDepth = 64;

absl::StatusOr<jinja::Value> JinjaFromJson(std::string_view text,
                                           int max_depth = kMaxJinjaJsonDepth);

}  // namespace llm::client

#endif  // LLM_CLIENT_GENERATE_JINJA_JSON_H_
