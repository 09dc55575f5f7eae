// A list of choices as a grammar: `root ::= "A" | "B"`, each choice a string
// literal of xgrammar's EBNF (GBNF) with '"', '\' and control characters
// escaped.
#ifndef LLM_CLIENT_CONSTRAIN_CHOICE_GRAMMAR_H_
#define LLM_CLIENT_CONSTRAIN_CHOICE_GRAMMAR_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace llm::constrain {

// InvalidArgument for an empty choice or one that is not UTF-8.
absl::StatusOr<std::string> ChoiceGrammar(const std::vector<std::string>& choices);

}  // namespace llm::constrain

#endif  // LLM_CLIENT_CONSTRAIN_CHOICE_GRAMMAR_H_
