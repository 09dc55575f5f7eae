#include <optional>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "client/cli/constrain_cmd.h"

ABSL_FLAG(std::string, json_schema, "",
          "Structured output: a file holding the JSON schema the output must follow.");
ABSL_FLAG(bool, json_object, false, "Structured output: the output is a JSON object (any).");
ABSL_FLAG(std::string, regex, "",
          "Structured output: a regular expression the whole output must match.");
ABSL_FLAG(std::string, grammar, "",
          "Structured output: a file holding a GBNF grammar (llama.cpp's format; the rule "
          "'root' is the output).");
ABSL_FLAG(std::vector<std::string>, choice, {},
          "Structured output: an output allowed, exactly; repeat the flag for each (--choice "
          "yes --choice no).");
ABSL_FLAG(std::string, check, "",
          "constrain: a file of instances, one per line ('-': stdin), each checked token by "
          "token.");
ABSL_FLAG(
    bool, strict, false,
    "Structured output: JSON schema strict mode: properties and items the schema does not name "
    "are refused.");
ABSL_FLAG(bool, any_order, false,
          "Structured output: an object's properties in any order (default: the schema's order).");
ABSL_FLAG(
    bool, lenient, false,
    "Structured output: JSON schema keywords the engine does not enforce are ignored instead of "
    "refused.");
ABSL_FLAG(
    bool, compact_json, false,
    "Structured output: JSON exactly as Python's json.dumps writes it (', ' and ': '), no other "
    "whitespace.");
ABSL_FLAG(int, max_whitespace, 20,
          "Structured output: most whitespace characters between two JSON tokens (>= 20).");
ABSL_DECLARE_FLAG(std::string, vocab);  // tokenize_cmd.cc
ABSL_DECLARE_FLAG(bool, json);          // generate_cmd.cc; constrain: --json-object

namespace llm::cli {

absl::StatusOr<std::optional<constrain::Spec>> ConstraintSpecFromFlags(
    const std::vector<std::string>& choices, bool json_object) {
  const std::string schema_file = absl::GetFlag(FLAGS_json_schema);
  const std::string regex = absl::GetFlag(FLAGS_regex);
  const std::string grammar_file = absl::GetFlag(FLAGS_grammar);
  const int kinds = !schema_file.empty() + !regex.empty() + !grammar_file.empty() + json_object +
                    !choices.empty();
  if (kinds == 0) return std::nullopt;
  if (kinds > 1) {
    return absl::InvalidArgumentError(
        "give one of --json-schema FILE, --json-object, --regex RE, --grammar FILE or "
        "--choice A [--choice B ...]");
  }
  constrain::Spec spec;
  if (!schema_file.empty()) {
    spec.kind = constrain::Kind::kJsonSchema;
    absl::StatusOr<std::string> text = ReadFile(schema_file, "the JSON schema");
    if (!text.ok()) return text.status();
    spec.text = *std::move(text);
  } else if (json_object) {
    spec.kind = constrain::Kind::kJsonObject;
  } else if (!regex.empty()) {
    spec.kind = constrain::Kind::kRegex;
    spec.text = regex;
  } else if (!grammar_file.empty()) {
    spec.kind = constrain::Kind::kGrammar;
    absl::StatusOr<std::string> text = ReadFile(grammar_file, "the grammar");
    if (!text.ok()) return text.status();
    spec.text = *std::move(text);
  } else {
    spec.kind = constrain::Kind::kChoice;
    spec.choices = choices;
  }
  spec.strict = absl::GetFlag(FLAGS_strict);
  spec.any_order = absl::GetFlag(FLAGS_any_order);
  spec.lenient = absl::GetFlag(FLAGS_lenient);
  spec.any_whitespace = !absl::GetFlag(FLAGS_compact_json);
  spec.max_whitespace = absl::GetFlag(FLAGS_max_whitespace);
  return spec;
}

absl::StatusOr<ConstrainArgs> ConstrainArgsFromFlags(const std::vector<std::string>& choices) {
  ConstrainArgs args;
  args.vocab = absl::GetFlag(FLAGS_vocab);
  if (args.vocab.empty()) return absl::InvalidArgumentError("--vocab FILE is required");
  args.check = absl::GetFlag(FLAGS_check);
  // `llm constrain --json` is --json-object (it prints JSON lines anyway).
  absl::StatusOr<std::optional<constrain::Spec>> spec = ConstraintSpecFromFlags(
      choices, absl::GetFlag(FLAGS_json_object) || absl::GetFlag(FLAGS_json));
  if (!spec.ok()) return spec.status();
  if (!spec->has_value()) {
    return absl::InvalidArgumentError(
        "give one of --json-schema FILE, --json-object, --regex RE, --grammar FILE or "
        "--choice A [--choice B ...]");
  }
  args.spec = **std::move(spec);
  return args;
}

}  // namespace llm::cli
