// Python str semantics over UTF-8 strings, for the evaluator and the
// built-in filters: lengths and indices count code points, strip() strips
// what str.isspace() calls whitespace, split() without a separator splits on
// runs of it. upper()/lower()/title()/capitalize() change ASCII letters only
// (other letters are left as they are; Python would change them too).
// Invalid UTF-8 bytes count as one character each.
// Threads: pure functions.
#ifndef LLM_COMMON_JINJA_TEXT_H_
#define LLM_COMMON_JINJA_TEXT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace llm::jinja {

// Byte offsets of each code point's start, plus s.size() at the end.
std::vector<size_t> CharOffsets(std::string_view s);
size_t CharLength(std::string_view s);

// str.strip / lstrip / rstrip; `chars` null: whitespace.
std::string PyStrip(std::string_view s, const std::string* chars, bool left, bool right);
// str.split(sep, maxsplit); sep null: whitespace runs. maxsplit < 0: all.
std::vector<std::string> PySplit(std::string_view s, const std::string* sep, int64_t maxsplit);
std::string PyUpper(std::string_view s);
std::string PyLower(std::string_view s);
std::string PyTitle(std::string_view s);
std::string PyCapitalize(std::string_view s);

// Python slice indices resolved for a sequence of `length` items: the
// indices selected, in order.
std::vector<int64_t> SliceIndices(int64_t length, std::optional<int64_t> start,
                                  std::optional<int64_t> stop, int64_t step);

}  // namespace llm::jinja

#endif  // LLM_COMMON_JINJA_TEXT_H_
