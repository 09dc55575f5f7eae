#include "client/constrain/choice_grammar.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "common/strings.h"
#include "common/utf8.h"

namespace llm::constrain {

absl::StatusOr<std::string> ChoiceGrammar(const std::vector<std::string>& choices) {
  std::string grammar = "root ::= ";
  for (size_t i = 0; i < choices.size(); ++i) {
    const std::string_view choice = choices[i];
    if (choice.empty()) {
      return absl::InvalidArgumentError(llm::StrCat("choice: choice ", i, " is empty"));
    }
    if (i > 0) grammar += " | ";
    grammar += '"';
    for (size_t pos = 0; pos < choice.size();) {
      size_t len = 0;
      const int32_t cp = DecodeUtf8(choice, pos, &len);
      if (cp < 0) {
        return absl::InvalidArgumentError(
            llm::StrCat("choice: choice ", i, " is not UTF-8 (byte ", pos, ")"));
      }
      if (cp == '"' || cp == '\\') {
        grammar += '\\';
        grammar += static_cast<char>(cp);
      } else if (cp < 0x20 || cp == 0x7f) {
        absl::StrAppendFormat(&grammar, "\\u%04x", cp);
      } else {
        grammar.append(choice.substr(pos, len));
      }
      pos += len;
    }
    grammar += '"';
  }
  return grammar;
}

}  // namespace llm::constrain
