#include "common/utf8.h"

namespace llm {

void AppendUtf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

namespace {

// Expected total length of a sequence starting with `b`, or 0 if `b` cannot
// start one.
size_t SequenceLength(uint8_t b) {
  if (b < 0x80) return 1;
  if (b >= 0xC2 && b <= 0xDF) return 2;
  if (b >= 0xE0 && b <= 0xEF) return 3;
  if (b >= 0xF0 && b <= 0xF4) return 4;
  return 0;
}

// Valid range of the second byte given the first (RFC 3629 table 3-7).
bool SecondByteOk(uint8_t first, uint8_t second) {
  switch (first) {
    case 0xE0:
      return second >= 0xA0 && second <= 0xBF;
    case 0xED:
      return second >= 0x80 && second <= 0x9F;
    case 0xF0:
      return second >= 0x90 && second <= 0xBF;
    case 0xF4:
      return second >= 0x80 && second <= 0x8F;
    default:
      return second >= 0x80 && second <= 0xBF;
  }
}

}  // namespace

int32_t DecodeUtf8(std::string_view s, size_t pos, size_t* len) {
  *len = 1;
  const auto b0 = static_cast<uint8_t>(s[pos]);
  const size_t n = SequenceLength(b0);
  if (n == 1) return b0;
  if (n == 0 || pos + n > s.size()) return -1;
  const auto b1 = static_cast<uint8_t>(s[pos + 1]);
  if (!SecondByteOk(b0, b1)) return -1;
  uint32_t cp = b0 & (0xFF >> (n + 1));
  for (size_t i = 1; i < n; ++i) {
    const auto b = static_cast<uint8_t>(s[pos + i]);
    if ((b & 0xC0) != 0x80) return -1;
    cp = (cp << 6) | (b & 0x3F);
  }
  *len = n;
  return static_cast<int32_t>(cp);
}

size_t CompleteUtf8Prefix(std::string_view s) {
  // Look for the start of the last sequence among the final 3 bytes.
  const size_t size = s.size();
  for (size_t back = 1; back <= 3 && back <= size; ++back) {
    const auto b = static_cast<uint8_t>(s[size - back]);
    if ((b & 0xC0) == 0x80) continue;  // continuation byte: keep looking
    const size_t n = SequenceLength(b);
    if (n <= back) return size;  // complete, ASCII, or never valid
    // The tail s[size-back..] is a prefix of an n-byte sequence: hold it only
    // if every byte so far is valid for that sequence.
    if (back >= 2 && !SecondByteOk(b, static_cast<uint8_t>(s[size - back + 1]))) return size;
    return size - back;
  }
  return size;
}

}  // namespace llm
