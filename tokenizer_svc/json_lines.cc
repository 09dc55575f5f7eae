#include "tokenizer_svc/json_lines.h"

#include <array>
#include <charconv>
#include <cstring>

namespace llm::tok::jsonl {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

size_t SkipSpace(std::string_view s, size_t i) {
  while (i < s.size() && IsSpace(s[i])) ++i;
  return i;
}

// Whether s[i..] starts with `token`; moves i past it.
bool Consume(std::string_view s, size_t* i, std::string_view token) {
  if (s.substr(*i, token.size()) != token) return false;
  *i += token.size();
  return true;
}

// Byte classes inside a JSON string.
enum : uint8_t { kPlain, kQuote, kBackslash, kControl, kHigh };
constexpr std::array<uint8_t, 256> kClass = [] {
  std::array<uint8_t, 256> t{};
  for (int c = 0; c < 0x20; ++c) t[c] = kControl;
  for (int c = 0x80; c < 0x100; ++c) t[c] = kHigh;
  t['"'] = kQuote;
  t['\\'] = kBackslash;
  return t;
}();

// Length of the valid UTF-8 sequence that starts at s[i] (a byte >= 0x80), or
// 0: the ranges of RFC 3629, which nlohmann's lexer checks too.
size_t Utf8Length(std::string_view s, size_t i) {
  const auto at = [&](size_t k) -> unsigned {
    return i + k < s.size() ? static_cast<uint8_t>(s[i + k]) : 0x100;
  };
  const auto in = [](unsigned x, unsigned lo, unsigned hi) { return x >= lo && x <= hi; };
  const unsigned c = at(0);
  if (in(c, 0xC2, 0xDF)) return in(at(1), 0x80, 0xBF) ? 2 : 0;
  if (in(c, 0xE0, 0xEF)) {
    const unsigned lo = c == 0xE0 ? 0xA0 : 0x80;
    const unsigned hi = c == 0xED ? 0x9F : 0xBF;
    return in(at(1), lo, hi) && in(at(2), 0x80, 0xBF) ? 3 : 0;
  }
  if (in(c, 0xF0, 0xF4)) {
    const unsigned lo = c == 0xF0 ? 0x90 : 0x80;
    const unsigned hi = c == 0xF4 ? 0x8F : 0xBF;
    return in(at(1), lo, hi) && in(at(2), 0x80, 0xBF) && in(at(3), 0x80, 0xBF) ? 4 : 0;
  }
  return 0;
}

// Four hex digits at s[i..i+4), or -1.
int32_t Hex4(std::string_view s, size_t i) {
  if (i + 4 > s.size()) return -1;
  uint16_t v = 0;
  const char* end = s.data() + i + 4;
  const auto [ptr, ec] = std::from_chars(s.data() + i, end, v, 16);
  return ec == std::errc() && ptr == end ? v : -1;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// The escape at s[*i] == '\\': appends its bytes and moves *i past it.
bool Unescape(std::string_view s, size_t* i, std::string* out) {
  if (*i + 1 >= s.size()) return false;
  const char e = s[*i + 1];
  *i += 2;
  switch (e) {
    case '"':
    case '\\':
    case '/':
      out->push_back(e);
      return true;
    case 'b':
      out->push_back('\b');
      return true;
    case 'f':
      out->push_back('\f');
      return true;
    case 'n':
      out->push_back('\n');
      return true;
    case 'r':
      out->push_back('\r');
      return true;
    case 't':
      out->push_back('\t');
      return true;
    case 'u':
      break;
    default:
      return false;
  }
  const int32_t hi = Hex4(s, *i);
  if (hi < 0 || (hi >= 0xDC00 && hi <= 0xDFFF)) return false;  // a lone low surrogate
  *i += 4;
  if (hi < 0xD800 || hi > 0xDBFF) {
    AppendUtf8(static_cast<uint32_t>(hi), out);
    return true;
  }
  // A high surrogate: a low one must follow.
  if (*i + 2 > s.size() || s[*i] != '\\' || s[*i + 1] != 'u') return false;
  const int32_t lo = Hex4(s, *i + 2);
  if (lo < 0xDC00 || lo > 0xDFFF) return false;
  *i += 6;
  AppendUtf8(
      0x10000 + ((static_cast<uint32_t>(hi) - 0xD800) << 10) + (static_cast<uint32_t>(lo) - 0xDC00),
      out);
  return true;
}

// The string that starts at s[*i] == '"'; moves *i past its closing quote.
bool ParseString(std::string_view s, size_t* i, std::string* scratch, std::string_view* value) {
  const size_t start = *i + 1;
  size_t pos = start;
  size_t run = start;  // start of the bytes not yet copied to *scratch
  bool escaped = false;
  while (pos < s.size()) {
    switch (kClass[static_cast<uint8_t>(s[pos])]) {
      case kPlain:
        ++pos;
        break;
      case kQuote:
        if (escaped) {
          scratch->append(s.substr(run, pos - run));
          *value = *scratch;
        } else {
          *value = s.substr(start, pos - start);
        }
        *i = pos + 1;
        return true;
      case kBackslash:
        if (!escaped) scratch->clear();
        escaped = true;
        scratch->append(s.substr(run, pos - run));
        if (!Unescape(s, &pos, scratch)) return false;
        run = pos;
        break;
      case kControl:
        return false;
      default: {  // kHigh
        const size_t n = Utf8Length(s, pos);
        if (n == 0) return false;
        pos += n;
      }
    }
  }
  return false;  // no closing quote
}

// {  "key"  :  — the start of an object with the key spelled as given.
bool ObjectStart(std::string_view line, std::string_view quoted_key, size_t* i) {
  *i = SkipSpace(line, 0);
  if (!Consume(line, i, "{")) return false;
  *i = SkipSpace(line, *i);
  if (!Consume(line, i, quoted_key)) return false;
  *i = SkipSpace(line, *i);
  if (!Consume(line, i, ":")) return false;
  *i = SkipSpace(line, *i);
  return true;
}

// }  and the end of the line.
bool ObjectEnd(std::string_view line, size_t i) {
  i = SkipSpace(line, i);
  if (!Consume(line, &i, "}")) return false;
  return SkipSpace(line, i) == line.size();
}

}  // namespace

bool ParseTextObject(std::string_view line, std::string* scratch, std::string_view* text) {
  size_t i;
  if (!ObjectStart(line, "\"text\"", &i)) return false;
  if (i >= line.size() || line[i] != '"') return false;
  if (!ParseString(line, &i, scratch, text)) return false;
  return ObjectEnd(line, i);
}

bool ParseIdsObject(std::string_view line, std::vector<uint32_t>* ids) {
  ids->clear();
  size_t i;
  if (!ObjectStart(line, "\"ids\"", &i)) return false;
  if (!Consume(line, &i, "[")) return false;
  i = SkipSpace(line, i);
  if (i < line.size() && line[i] == ']') return ObjectEnd(line, i + 1);
  while (true) {
    // An unsigned integer: "0" or a digit 1-9 and more digits, below 2^32.
    const size_t start = i;
    uint64_t v = 0;
    while (i < line.size() && line[i] >= '0' && line[i] <= '9' && i - start < 11) {
      v = v * 10 + static_cast<uint64_t>(line[i] - '0');
      ++i;
    }
    if (i == start || (line[start] == '0' && i - start > 1) || v > UINT32_MAX) return false;
    ids->push_back(static_cast<uint32_t>(v));
    i = SkipSpace(line, i);
    if (i >= line.size()) return false;
    if (line[i] == ']') return ObjectEnd(line, i + 1);
    if (line[i] != ',') return false;  // also a fraction or an exponent
    i = SkipSpace(line, i + 1);
  }
}

void AppendIdsLine(std::span<const uint32_t> ids, std::string* out) {
  constexpr std::string_view kOpen = "{\"ids\":[";
  const size_t old_size = out->size();
  out->resize(old_size + kOpen.size() + ids.size() * 11 + 3);
  char* p = out->data() + old_size;
  char* const end = out->data() + out->size();
  std::memcpy(p, kOpen.data(), kOpen.size());
  p += kOpen.size();
  for (size_t k = 0; k < ids.size(); ++k) {
    if (k > 0) *p++ = ',';
    p = std::to_chars(p, end, ids[k]).ptr;
  }
  std::memcpy(p, "]}\n", 3);
  p += 3;
  out->resize(static_cast<size_t>(p - out->data()));
}

bool IsStrictUtf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    if (static_cast<uint8_t>(text[i]) < 0x80) {
      ++i;
      continue;
    }
    const size_t n = Utf8Length(text, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

bool AppendTextLine(std::string_view text, std::string* out) {
  if (!IsStrictUtf8(text)) return false;
  out->append("{\"text\":\"");
  size_t run = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<uint8_t>(text[i]);
    const uint8_t cls = kClass[c];
    if (cls == kPlain || cls == kHigh) continue;
    out->append(text.substr(run, i - run));
    run = i + 1;
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\b':
        out->append("\\b");
        break;
      case '\f':
        out->append("\\f");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      default: {
        constexpr char kHex[] = "0123456789abcdef";
        const char escape[6] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 15]};
        out->append(escape, sizeof(escape));
      }
    }
  }
  out->append(text.substr(run));
  out->append("\"}\n");
  return true;
}

}  // namespace llm::tok::jsonl
