#include "client/constrain/bounds.h"

#include <cstddef>
#include <string>
#include <string_view>

#include "common/strings.h"

namespace llm::constrain {
namespace {

absl::Status TooDeep(std::string_view what, int max, size_t offset) {
  return absl::InvalidArgumentError(
      llm::StrCat(what, " nests deeper than ", max, " levels (at byte ", offset, ")"));
}

}  // namespace

absl::Status CheckJsonNesting(std::string_view json, int max) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < json.size(); ++i) {
    const char c = json[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max) return TooDeep("the JSON", max, i);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return absl::OkStatus();
}

absl::Status CheckRegexNesting(std::string_view regex, int max) {
  int depth = 0;
  for (size_t i = 0; i < regex.size(); ++i) {
    const char c = regex[i];
    if (c == '\\') {
      ++i;
    } else if (c == '(') {
      if (++depth > max) return TooDeep("the regex", max, i);
    } else if (c == ')' && depth > 0) {
      --depth;
    }
  }
  return absl::OkStatus();
}

absl::Status CheckGrammarNesting(std::string_view grammar, int max) {
  int depth = 0;
  char quote = 0;  // '"' in a string, ']' in a class, '\n' in a comment
  for (size_t i = 0; i < grammar.size(); ++i) {
    const char c = grammar[i];
    if (quote != 0) {
      if (c == '\\' && quote != '\n') {
        ++i;
      } else if (c == quote) {
        quote = 0;
      }
    } else if (c == '"') {
      quote = '"';
    } else if (c == '[') {
      quote = ']';
    } else if (c == '#') {
      quote = '\n';
    } else if (c == '(') {
      if (++depth > max) return TooDeep("the grammar", max, i);
    } else if (c == ')' && depth > 0) {
      --depth;
    }
  }
  return absl::OkStatus();
}

}  // namespace llm::constrain
