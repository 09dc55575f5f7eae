#include "gateway/json_fields.h"

#include <cmath>
#include <limits>

#include "common/strings.h"

namespace llm::gateway {

using nlohmann::json;

// The field's value, or null when absent or null.
const json* Field(const json& object, const char* name) {
  auto it = object.find(name);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

// A number field in [lo, hi] ((lo, hi] when `above_lo`) into *out; an error
// naming it otherwise. With `above_lo`, a value that float rounds down to
// lo (top_p 1e-300) becomes the next float above it.
std::optional<ApiError> ReadNumber(const json& body, const char* name, double lo, double hi,
                                   float* out, bool above_lo) {
  const json* v = Field(body, name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) return BadParam(name, StrCat(name, " must be a number"));
  const double d = v->get<double>();
  if (!std::isfinite(d) || d < lo || (above_lo && d == lo) || d > hi) {
    return BadParam(name, StrCat(name, " must be in ", above_lo ? "(" : "[", lo, ", ", hi,
                                 "], got ", v->dump()));
  }
  *out = static_cast<float>(d);
  if (above_lo && *out <= static_cast<float>(lo)) {
    *out = std::nextafter(static_cast<float>(lo), std::numeric_limits<float>::infinity());
  }
  return std::nullopt;
}

// An integer field in [lo, hi] into *out.
std::optional<ApiError> ReadInt(const json& body, const char* name, int64_t lo, int64_t hi,
                                int64_t* out, bool* present) {
  const json* v = Field(body, name);
  if (present != nullptr) *present = v != nullptr;
  if (v == nullptr) return std::nullopt;
  if (!v->is_number_integer()) return BadParam(name, StrCat(name, " must be an integer"));
  const int64_t i = v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)
                        ? INT64_MAX
                        : v->get<int64_t>();
  if (i < lo || i > hi) {
    return BadParam(name, StrCat(name, " must be in [", lo, ", ", hi, "], got ", v->dump()));
  }
  *out = i;
  return std::nullopt;
}

std::optional<ApiError> ReadBool(const json& body, const char* name, bool* out) {
  const json* v = Field(body, name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) return BadParam(name, StrCat(name, " must be a boolean"));
  *out = v->get<bool>();
  return std::nullopt;
}

// An optional string field (/tokenize's model).
std::optional<ApiError> ReadOptionalString(const json& j, const char* name,
                                           std::optional<std::string>* out) {
  const json* v = Field(j, name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) return BadParam(name, StrCat(name, " must be a string"));
  *out = v->get<std::string>();
  return std::nullopt;
}

// A message's content: a string, or an array of {"type": "text", "text": ...}
// parts (joined).
std::optional<ApiError> ReadContent(const json& content, const std::string& param,
                                    std::string* out) {
  if (content.is_string()) {
    *out = content.get<std::string>();
    return std::nullopt;
  }
  if (!content.is_array()) {
    return BadParam(param, "content must be a string or an array of text parts");
  }
  out->clear();
  for (size_t i = 0; i < content.size(); ++i) {
    const json& part = content[i];
    const std::string p = StrCat(param, "[", i, "]");
    if (!part.is_object() || part.value("type", json()) != "text" || !part.contains("text") ||
        !part["text"].is_string()) {
      return BadParam(p,
                      "only text content parts ({\"type\": \"text\", \"text\": ...}) are "
                      "supported");
    }
    *out += part["text"].get<std::string>();
  }
  return std::nullopt;
}

std::optional<ApiError> ReadMessageArray(const json& j, int max, const json** out) {
  const json* messages = Field(j, "messages");
  if (messages == nullptr) return BadParam("messages", "messages is required");
  if (!messages->is_array() || messages->empty()) {
    return BadParam("messages", "messages must be a non-empty array");
  }
  if (messages->size() > static_cast<size_t>(max)) {
    return BadParam("messages", StrCat("at most ", max, " messages"));
  }
  *out = messages;
  return std::nullopt;
}

}  // namespace llm::gateway
