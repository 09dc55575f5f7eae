// String concatenation that accepts std::string_view.
//
// Debian 12's Abseil is built with its own absl::string_view (not an alias of
// std::string_view), so absl::StrCat rejects std::string_view arguments. This
// StrCat takes anything convertible to std::string_view plus arithmetic values
// and appends them with one allocation sized up front for the string parts.
#ifndef LLM_COMMON_STRINGS_H_
#define LLM_COMMON_STRINGS_H_

#include <charconv>
#include <string>
#include <string_view>
#include <type_traits>

#include "absl/strings/string_view.h"

namespace llm {
namespace strings_internal {

template <typename T>
void AppendOne(std::string& out, const T& value) {
  if constexpr (std::is_same_v<T, bool>) {
    out += value ? "true" : "false";
  } else if constexpr (std::is_same_v<T, char>) {
    out.push_back(value);
  } else if constexpr (std::is_integral_v<T> || std::is_enum_v<T>) {
    char buf[24];
    auto v = static_cast<std::conditional_t<std::is_enum_v<T>, long long, T>>(value);
    auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
    out.append(buf, end);
  } else if constexpr (std::is_floating_point_v<T>) {
    char buf[64];
    auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
    out.append(buf, end);
  } else if constexpr (std::is_same_v<T, absl::string_view>) {
    out.append(value.data(), value.size());
  } else {
    out += std::string_view(value);
  }
}

}  // namespace strings_internal

template <typename... Args>
std::string StrCat(const Args&... args) {
  std::string out;
  (strings_internal::AppendOne(out, args), ...);
  return out;
}

template <typename... Args>
void StrAppend(std::string* out, const Args&... args) {
  (strings_internal::AppendOne(*out, args), ...);
}

// Joins the elements of `parts` (each convertible to std::string_view).
template <typename Range>
std::string StrJoin(const Range& parts, std::string_view sep) {
  std::string out;
  bool first = true;
  for (const auto& p : parts) {
    if (!first) out += sep;
    first = false;
    out += std::string_view(p);
  }
  return out;
}

// `s` cut to at most `max_bytes` bytes (at a UTF-8 character boundary) with
// "...(N bytes)" appended when it was longer: for echoing client input into
// status messages and logs without echoing an unbounded amount of it.
inline std::string Clip(std::string_view s, size_t max_bytes) {
  if (s.size() <= max_bytes) return std::string(s);
  size_t n = max_bytes;
  // Back off continuation bytes (10xxxxxx) so that no character is cut.
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return StrCat(s.substr(0, n), "...(", s.size(), " bytes)");
}

// std::string_view to the Abseil type, for Abseil APIs (SimpleAtoi, Base64...).
inline absl::string_view ToAbsl(std::string_view s) { return {s.data(), s.size()}; }

}  // namespace llm

#endif  // LLM_COMMON_STRINGS_H_
