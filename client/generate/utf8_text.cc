#include "client/generate/utf8_text.h"

#include <cstdint>

namespace llm::client {
namespace {

// Length of the well-formed sequence at s[pos], or 0 with *bad set to the
// length of the maximal invalid subpart (>= 1).
size_t SequenceAt(std::string_view s, size_t pos, size_t* bad) {
  const auto b = [&](size_t i) { return static_cast<uint8_t>(s[i]); };
  const uint8_t c = b(pos);
  if (c < 0x80) return 1;
  size_t need;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    need = 1;
  } else if (c >= 0xE0 && c <= 0xEF) {
    need = 2;
    if (c == 0xE0) lo = 0xA0;  // no overlongs
    if (c == 0xED) hi = 0x9F;  // no surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    need = 3;
    if (c == 0xF0) lo = 0x90;  // no overlongs
    if (c == 0xF4) hi = 0x8F;  // <= U+10FFFF
  } else {
    *bad = 1;
    return 0;
  }
  for (size_t i = 1; i <= need; ++i) {
    if (pos + i >= s.size()) {
      *bad = i;
      return 0;
    }
    const uint8_t x = b(pos + i);
    const bool fits = i == 1 ? (x >= lo && x <= hi) : (x >= 0x80 && x <= 0xBF);
    if (!fits) {
      *bad = i;
      return 0;
    }
  }
  return need + 1;
}

}  // namespace

bool IsValidUtf8(std::string_view s) {
  for (size_t pos = 0; pos < s.size();) {
    size_t bad = 0;
    const size_t n = SequenceAt(s, pos, &bad);
    if (n == 0) return false;
    pos += n;
  }
  return true;
}

std::string SanitizeUtf8(std::string_view s) {
  if (IsValidUtf8(s)) return std::string(s);
  std::string out;
  out.reserve(s.size() + 8);
  for (size_t pos = 0; pos < s.size();) {
    size_t bad = 0;
    const size_t n = SequenceAt(s, pos, &bad);
    if (n > 0) {
      out.append(s.substr(pos, n));
      pos += n;
    } else {
      out.append("\xEF\xBF\xBD");
      pos += bad;
    }
  }
  return out;
}

size_t CompleteUtf8Prefix(std::string_view s) {
  // Find the last lead byte among the final 3 bytes.
  for (size_t back = 1; back <= 3 && back <= s.size(); ++back) {
    const size_t pos = s.size() - back;
    const uint8_t c = static_cast<uint8_t>(s[pos]);
    if (c >= 0x80 && c <= 0xBF) continue;  // a continuation byte: look further back
    size_t bad = 0;
    if (SequenceAt(s, pos, &bad) > 0) return s.size();  // complete
    // Incomplete if every byte after the lead was accepted (bad == back).
    return bad == back && c >= 0xC2 && c <= 0xF4 ? pos : s.size();
  }
  return s.size();
}

}  // namespace llm::client
