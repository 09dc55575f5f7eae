#include "common/jinja/text.h"

#include <algorithm>

namespace llm::jinja {
namespace {

// The length of the UTF-8 sequence starting at s[i] (1 for an invalid byte).
size_t SeqLength(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
  if (i + n > s.size()) return 1;
  for (size_t k = 1; k < n; ++k) {
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 1;
  }
  return n;
}

uint32_t Decode(std::string_view s, size_t i, size_t n) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (n == 1) return c;
  uint32_t cp = c & (n == 2 ? 0x1F : n == 3 ? 0x0F : 0x07);
  for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  return cp;
}

bool IsPySpace(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

struct Char {
  size_t begin;
  size_t size;
  uint32_t cp;
};

std::vector<Char> Chars(std::string_view s) {
  std::vector<Char> out;
  for (size_t i = 0; i < s.size();) {
    const size_t n = SeqLength(s, i);
    out.push_back({i, n, Decode(s, i, n)});
    i += n;
  }
  return out;
}

}  // namespace

std::vector<size_t> CharOffsets(std::string_view s) {
  std::vector<size_t> out;
  for (size_t i = 0; i < s.size(); i += SeqLength(s, i)) out.push_back(i);
  out.push_back(s.size());
  return out;
}

size_t CharLength(std::string_view s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size(); i += SeqLength(s, i)) ++n;
  return n;
}

std::string PyStrip(std::string_view s, const std::string* chars, bool left, bool right) {
  const std::vector<Char> cs = Chars(s);
  std::vector<uint32_t> set;
  if (chars != nullptr) {
    for (const Char& c : Chars(*chars)) set.push_back(c.cp);
  }
  const auto strip = [&](const Char& c) {
    return chars == nullptr ? IsPySpace(c.cp)
                            : std::find(set.begin(), set.end(), c.cp) != set.end();
  };
  size_t b = 0, e = cs.size();
  if (left) {
    while (b < e && strip(cs[b])) ++b;
  }
  if (right) {
    while (e > b && strip(cs[e - 1])) --e;
  }
  if (b == e) return "";
  return std::string(s.substr(cs[b].begin, cs[e - 1].begin + cs[e - 1].size - cs[b].begin));
}

std::vector<std::string> PySplit(std::string_view s, const std::string* sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep != nullptr) {
    size_t pos = 0;
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
      const size_t at = s.find(*sep, pos);
      if (at == std::string_view::npos) break;
      out.emplace_back(s.substr(pos, at - pos));
      pos = at + sep->size();
    }
    out.emplace_back(s.substr(pos));
    return out;
  }
  const std::vector<Char> cs = Chars(s);
  size_t i = 0;
  while (true) {
    while (i < cs.size() && IsPySpace(cs[i].cp)) ++i;
    if (i == cs.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
      // The rest, without its trailing whitespace.
      size_t e = cs.size();
      while (e > i && IsPySpace(cs[e - 1].cp)) --e;
      out.emplace_back(s.substr(cs[i].begin, cs[e - 1].begin + cs[e - 1].size - cs[i].begin));
      break;
    }
    const size_t b = i;
    while (i < cs.size() && !IsPySpace(cs[i].cp)) ++i;
    out.emplace_back(s.substr(cs[b].begin, cs[i - 1].begin + cs[i - 1].size - cs[b].begin));
  }
  return out;
}

std::string PyUpper(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return out;
}

std::string PyLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

std::string PyTitle(std::string_view s) {
  std::string out(s);
  bool prev_letter = false;
  for (char& c : out) {
    const bool lower = c >= 'a' && c <= 'z';
    const bool upper = c >= 'A' && c <= 'Z';
    if (lower && !prev_letter) c = static_cast<char>(c - 'a' + 'A');
    if (upper && prev_letter) c = static_cast<char>(c - 'A' + 'a');
    prev_letter = lower || upper;
  }
  return out;
}

std::string PyCapitalize(std::string_view s) {
  std::string out = PyLower(s);
  if (!out.empty() && out[0] >= 'a' && out[0] <= 'z') out[0] = static_cast<char>(out[0] - 32);
  return out;
}

std::vector<int64_t> SliceIndices(int64_t length, std::optional<int64_t> start,
                                  std::optional<int64_t> stop, int64_t step) {
  std::vector<int64_t> out;
  if (step == 0) return out;
  const auto clamp = [&](std::optional<int64_t> v, int64_t dflt, int64_t lo, int64_t hi) {
    if (!v) return dflt;
    int64_t x = *v;
    if (x < 0) x += length;
    return std::clamp(x, lo, hi);
  };
  if (step > 0) {
    const int64_t b = clamp(start, 0, 0, length);
    const int64_t e = clamp(stop, length, 0, length);
    for (int64_t i = b; i < e; i += step) out.push_back(i);
  } else {
    const int64_t b = clamp(start, length - 1, -1, length - 1);
    const int64_t e = clamp(stop, -1, -1, length - 1);
    for (int64_t i = b; i > e; i += step) out.push_back(i);
  }
  return out;
}

}  // namespace llm::jinja
