// OpenAI's error answer, and JSON text in and out for the gateway's request
// bodies: one parser for every endpoint (chat, completions, /tokenize,
// /detokenize) that bounds the nesting depth, says where malformed JSON goes
// wrong and refuses bytes after the value; and error messages that quote a
// client's value only boundedly.
//
// Why bounded: nlohmann's parser is iterative, but dump(), copies and
// comparisons of a value recurse once per nesting level, and civetweb's
// worker threads have small stacks (100 KiB), so a deeply nested body that
// reaches any of them ends the process. A body deeper than kMaxJsonDepth is
// refused while it is parsed, before it is built deeper.
//
// Threads: free functions, no state. No gRPC, no civetweb (the request
// fuzzer links this without the services).
#ifndef LLM_GATEWAY_API_ERROR_H_
#define LLM_GATEWAY_API_ERROR_H_

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace llm::gateway {

// An error answer: the HTTP status and OpenAI's error object.
struct ApiError {
  int http_status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // "" = null
  std::string code;   // "" = null
};

ApiError BadParam(std::string_view param, std::string_view message);
// {"error": {...}}.
nlohmann::json ErrorJson(const ApiError& error);

// The deepest nesting of arrays and objects a request body may have (the
// top-level object is level 1). OpenAI's bodies need 5 or so.
inline constexpr int kMaxJsonDepth = 64;

// Parses `body` as one JSON value into *out: nullopt, or a 400 without a
// param: not valid JSON (saying where: byte offset, line and column, and
// what nlohmann expected, never quoting the body), nested deeper than
// `max_depth`, or followed by anything but whitespace (a NUL byte
// included). Cost: one pass; memory proportional to the body; stack
// independent of the depth.
std::optional<ApiError> ParseJsonBody(std::string_view body, nlohmann::json* out,
                                      int max_depth = kMaxJsonDepth);
// The same, keeping every object's keys in their order in the text (for
// what is passed on as the client wrote it: tools' JSON Schemas, a tool
// call's input); a repeated key keeps its first place and its last value.
// Linear in the body too.
std::optional<ApiError> ParseJsonBody(std::string_view body, nlohmann::ordered_json* out,
                                      int max_depth = kMaxJsonDepth);

// For an error message: `s` in single quotes, cut to its first 100 bytes
// (at a character boundary, then "..." and its length) when longer.
std::string QuoteForError(std::string_view s);
// For an error message: a client's value without dumping a structure: a
// string quoted (QuoteForError), a number, boolean or null as JSON, and
// "an array" / "an object" otherwise.
std::string DescribeForError(const nlohmann::json& value);

// JSON text that never throws on invalid UTF-8 (replaced with U+FFFD).
// Recursive: only for values the gateway built (responses, errors).
std::string Dump(const nlohmann::json& j);
// The same for a value that keeps its keys' order (a client's schema).
std::string Dump(const nlohmann::ordered_json& j);

}  // namespace llm::gateway

#endif  // LLM_GATEWAY_API_ERROR_H_
