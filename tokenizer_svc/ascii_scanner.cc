#include "tokenizer_svc/ascii_scanner.h"

#include <array>

namespace llm::tok {
namespace {

constexpr std::string_view kCl100kPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kO200kPattern =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Classes of the characters the patterns tell apart.
enum Class : uint8_t {
  kOther,     // not whitespace, letter or digit: [^\s\p{L}\p{N}]
  kUpper,     // A-Z (\p{Lu})
  kLower,     // a-z (\p{Ll})
  kDigit,     // 0-9 (\p{N})
  kSpace,     // \s other than \r and \n: \t \v \f and ' '
  kNewline,   // \r \n
  kEnd,       // past the end of the text
  kNonAscii,  // a byte >= 0x80: unknown here
};

constexpr std::array<Class, 128> MakeTable() {
  std::array<Class, 128> t{};
  for (int c = 0; c < 128; ++c) {
    if (c >= 'A' && c <= 'Z') {
      t[c] = kUpper;
    } else if (c >= 'a' && c <= 'z') {
      t[c] = kLower;
    } else if (c >= '0' && c <= '9') {
      t[c] = kDigit;
    } else if (c == '\r' || c == '\n') {
      t[c] = kNewline;
    } else if (c == '\t' || c == '\v' || c == '\f' || c == ' ') {
      t[c] = kSpace;
    } else {
      t[c] = kOther;
    }
  }
  return t;
}
constexpr std::array<Class, 128> kTable = MakeTable();

Class ClassAt(std::string_view s, size_t i) {
  if (i >= s.size()) return kEnd;
  const auto b = static_cast<uint8_t>(s[i]);
  return b < 0x80 ? kTable[b] : kNonAscii;
}

bool IsLetter(Class c) { return c == kUpper || c == kLower; }
char Lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; }

// (?i:'s|'t|'re|'ve|'m|'ll|'d) at s[i] == '\'': its length, 0 for no match,
// -1 for unknown.
int Contraction(std::string_view s, size_t i) {
  const Class c1 = ClassAt(s, i + 1);
  if (c1 == kNonAscii) return -1;
  if (!IsLetter(c1)) return 0;
  const char l1 = Lower(s[i + 1]);
  if (l1 == 's' || l1 == 't' || l1 == 'm' || l1 == 'd') return 2;
  if (l1 != 'r' && l1 != 'v' && l1 != 'l') return 0;
  const Class c2 = ClassAt(s, i + 2);
  if (c2 == kNonAscii) return -1;
  if (!IsLetter(c2)) return 0;
  return Lower(s[i + 2]) == (l1 == 'l' ? 'l' : 'e') ? 3 : 0;
}

// Where the letters of [^\r\n\p{L}\p{N}]?<letters> start: pos, pos + 1, or
// npos when the alternative cannot match; sets *unknown when it depends on a
// non-ASCII byte.
size_t LettersStart(std::string_view s, size_t pos, Class c0, bool* unknown) {
  if (IsLetter(c0)) return pos;
  if (c0 != kOther && c0 != kSpace) return std::string_view::npos;
  const Class c1 = ClassAt(s, pos + 1);
  if (c1 == kNonAscii) *unknown = true;
  return IsLetter(c1) ? pos + 1 : std::string_view::npos;
}

// \p{N}{1,3} at a digit.
size_t Digits(std::string_view s, size_t pos) {
  size_t k = pos;
  while (k - pos < 3 && ClassAt(s, k) == kDigit) ++k;
  if (k - pos < 3 && ClassAt(s, k) == kNonAscii) return 0;
  return k - pos;
}

// " ?[^\s\p{L}\p{N}]+" then [\r\n]* (plus '/' when `slash`); npos when it
// cannot match, 0 when unknown, else the length.
size_t Punctuation(std::string_view s, size_t pos, Class c0, bool slash) {
  size_t k = pos;
  if (s[pos] == ' ') {
    const Class c1 = ClassAt(s, pos + 1);
    if (c1 == kNonAscii) return 0;
    if (c1 != kOther) return std::string_view::npos;
    k = pos + 1;
  } else if (c0 != kOther) {
    return std::string_view::npos;
  }
  while (ClassAt(s, k) == kOther) ++k;
  if (ClassAt(s, k) == kNonAscii) return 0;
  while (k < s.size() && (s[k] == '\r' || s[k] == '\n' || (slash && s[k] == '/'))) ++k;
  return k - pos;
}

// \s*[\r\n]+ | \s+(?!\S) | \s+ at a whitespace character.
size_t Whitespace(std::string_view s, size_t pos) {
  size_t k = pos;
  size_t last_newline = std::string_view::npos;
  for (;; ++k) {
    const Class c = ClassAt(s, k);
    if (c == kNewline) {
      last_newline = k;
    } else if (c != kSpace) {
      if (c == kNonAscii) return 0;
      break;
    }
  }
  if (last_newline != std::string_view::npos) return last_newline + 1 - pos;
  const size_t w = k - pos;
  if (k == s.size() || w == 1) return w;  // \s+(?!\S) at the end, else \s+
  return w - 1;                           // \s+(?!\S) backs off one
}

size_t MatchCl100k(std::string_view s, size_t pos) {
  const Class c0 = ClassAt(s, pos);
  if (c0 == kNonAscii) return 0;
  if (s[pos] == '\'') {
    const int n = Contraction(s, pos);
    if (n < 0) return 0;
    if (n > 0) return static_cast<size_t>(n);
  }
  bool unknown = false;
  const size_t start = LettersStart(s, pos, c0, &unknown);
  if (unknown) return 0;
  if (start != std::string_view::npos) {
    size_t k = start;
    while (IsLetter(ClassAt(s, k))) ++k;
    return ClassAt(s, k) == kNonAscii ? 0 : k - pos;
  }
  if (c0 == kDigit) return Digits(s, pos);
  const size_t punct = Punctuation(s, pos, c0, /*slash=*/false);
  if (punct != std::string_view::npos) return punct;
  return Whitespace(s, pos);
}

size_t MatchO200k(std::string_view s, size_t pos) {
  const Class c0 = ClassAt(s, pos);
  if (c0 == kNonAscii) return 0;
  bool unknown = false;
  const size_t start = LettersStart(s, pos, c0, &unknown);
  if (unknown) return 0;
  if (start != std::string_view::npos) {
    // Upper* Lower+ (first alternative) or else Upper+ (second); in ASCII the
    // two runs are disjoint, so no backtracking changes them.
    size_t k = start;
    while (ClassAt(s, k) == kUpper) ++k;
    size_t end = k;
    while (ClassAt(s, end) == kLower) ++end;
    if (ClassAt(s, end) == kNonAscii) return 0;
    if (end < s.size() && s[end] == '\'') {
      const int n = Contraction(s, end);
      if (n < 0) return 0;
      end += static_cast<size_t>(n);
    }
    return end - pos;
  }
  if (c0 == kDigit) return Digits(s, pos);
  const size_t punct = Punctuation(s, pos, c0, /*slash=*/true);
  if (punct != std::string_view::npos) return punct;
  return Whitespace(s, pos);
}

}  // namespace

AsciiMatcher FindAsciiMatcher(std::string_view regex) {
  if (regex == kCl100kPattern) return &MatchCl100k;
  if (regex == kO200kPattern) return &MatchO200k;
  return nullptr;
}

}  // namespace llm::tok
