#include "gateway/http_auth.h"

#include <cstddef>

namespace llm::gateway {
namespace {

ApiError Unauthorized(std::string message) {
  ApiError e;
  e.http_status = 401;
  e.message = std::move(message);
  e.type = "invalid_request_error";
  e.code = "invalid_api_key";
  return e;
}

bool Blank(char c) { return c == ' ' || c == '\t'; }

std::string_view Strip(std::string_view s) {
  while (!s.empty() && Blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && Blank(s.back())) s.remove_suffix(1);
  return s;
}

// "Bearer" in any case (RFC 7235: the scheme is case-insensitive).
bool IsBearer(std::string_view s) {
  constexpr std::string_view kScheme = "bearer";
  if (s.size() != kScheme.size()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i] >= 'A' && s[i] <= 'Z' ? static_cast<char>(s[i] - 'A' + 'a') : s[i];
    if (c != kScheme[i]) return false;
  }
  return true;
}

}  // namespace

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  unsigned diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < b.size(); ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    diff |= static_cast<unsigned>(x ^ static_cast<unsigned char>(b[i]));
  }
  return diff == 0;
}

bool HttpAuth::Exempt(std::string_view path) { return path == "/health" || path == "/metrics"; }

std::optional<ApiError> HttpAuth::Check(std::string_view path, const char* authorization) const {
  if (token_.empty() || Exempt(path)) return std::nullopt;
  if (authorization == nullptr) {
    return Unauthorized(
        "this gateway needs an API key: send the header 'Authorization: Bearer <key>'");
  }
  const std::string_view value = Strip(authorization);
  const size_t blank = value.find_first_of(" \t");
  if (blank == std::string_view::npos || !IsBearer(value.substr(0, blank))) {
    return Unauthorized("the Authorization header is not 'Bearer <key>'");
  }
  if (!ConstantTimeEquals(Strip(value.substr(blank)), token_)) {
    return Unauthorized("incorrect API key provided");
  }
  return std::nullopt;
}

}  // namespace llm::gateway
