// The JSON lines of `llm tokenize` and `llm detokenize` (client/cli/tokenize_cmd.h)
// without a general JSON parser for the common shapes:
//
//   tokenize:   {"text": "..."}  ->  {"ids":[1,2,3]}
//   detokenize: {"ids": [1,2,3]} ->  {"text":"..."}
//
// Each parser accepts only lines that nlohmann::json::parse accepts, and gives
// the same value: exactly one object with the single key named (spelled
// without escapes), JSON whitespace anywhere between tokens, a string with
// strict UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing above
// U+10FFFF) and escapes including \uXXXX surrogate pairs, or an array of
// unsigned integers below 2^32 written without sign, fraction or exponent.
// Anything else, valid or not, returns false, and the caller parses the line
// with nlohmann::json, which then decides (another key order, more keys, a
// malformed line and its error message all stay as they were).
//
// The writers produce the bytes that nlohmann::json::dump(-1, ' ', false,
// error_handler_t::replace) gives for the same object: no spaces, ids in
// decimal, text with '"', '\\', \b \f \n \r \t and \u00xx (lowercase) for the
// other control characters escaped and everything else as it is.
// AppendTextLine returns false (appending nothing) for text that is not valid
// UTF-8, whose replacement characters it leaves to nlohmann.
//
// Threads: pure functions. Cost: one pass over the line (one table lookup per
// byte), no allocation when the string has no escapes.
#ifndef LLM_TOKENIZER_SVC_JSON_LINES_H_
#define LLM_TOKENIZER_SVC_JSON_LINES_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace llm::tok::jsonl {

// {"text": "..."}: *text is the decoded string, a view into `line` or, when
// the string has escapes, into *scratch.
bool ParseTextObject(std::string_view line, std::string* scratch, std::string_view* text);

// {"ids": [...]}: *ids is replaced by the numbers.
bool ParseIdsObject(std::string_view line, std::vector<uint32_t>* ids);

// Appends {"ids":[...]} and a newline.
void AppendIdsLine(std::span<const uint32_t> ids, std::string* out);

// Appends {"text":"..."} and a newline if `text` is valid UTF-8; else
// returns false and appends nothing.
bool AppendTextLine(std::string_view text, std::string* out);

// Whether `text` is valid UTF-8 as above.
bool IsStrictUtf8(std::string_view text);

}  // namespace llm::tok::jsonl

#endif  // LLM_TOKENIZER_SVC_JSON_LINES_H_
