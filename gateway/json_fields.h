// Reading a request body's fields (parsed by ParseJsonBody, api_error.h):
// each value checked for its type and range, an error naming the field
// otherwise (ApiError::param), quoting no unbounded client value. Shared by
// the OpenAI request parsers (openai_request.h) and Anthropic's
// (anthropic_api.h).
//
// Threads: free functions, no state.
#ifndef LLM_GATEWAY_JSON_FIELDS_H_
#define LLM_GATEWAY_JSON_FIELDS_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "gateway/api_error.h"

namespace llm::gateway {

// The field's value, or null when absent or null.
const nlohmann::json* Field(const nlohmann::json& object, const char* name);

// A number field in [lo, hi] ((lo, hi] when `above_lo`) into *out; an error
// naming it otherwise. With `above_lo`, a value that float rounds down to
// lo (top_p 1e-300) becomes the next float above it.
std::optional<ApiError> ReadNumber(const nlohmann::json& body, const char* name, double lo,
                                   double hi, float* out, bool above_lo = false);

// An integer field in [lo, hi] into *out; *present says whether it was given.
std::optional<ApiError> ReadInt(const nlohmann::json& body, const char* name, int64_t lo,
                                int64_t hi, int64_t* out, bool* present = nullptr);

std::optional<ApiError> ReadBool(const nlohmann::json& body, const char* name, bool* out);

// An optional string field.
std::optional<ApiError> ReadOptionalString(const nlohmann::json& j, const char* name,
                                           std::optional<std::string>* out);

// The body's "messages": a non-empty array of at most `max` entries into
// *out; the error (param "messages") otherwise.
std::optional<ApiError> ReadMessageArray(const nlohmann::json& j, int max,
                                         const nlohmann::json** out);

// A message's content: a string, or an array of {"type": "text", "text": ...}
// parts (joined). `param` names it in errors.
std::optional<ApiError> ReadContent(const nlohmann::json& content, const std::string& param,
                                    std::string* out);

}  // namespace llm::gateway

#endif  // LLM_GATEWAY_JSON_FIELDS_H_
