#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "client/cli/constrain_cmd.h"

ABSL_FLAG(std::string, json_schema, "",
          "constrain: a file holding the JSON schema the output must follow.");
ABSL_FLAG(std::string, regex, "", "constrain: a regular expression the whole output must match.");
ABSL_FLAG(std::string, grammar, "",
          "constrain: a file holding a GBNF grammar (llama.cpp's format; the rule 'root' is "
          "the output).");
ABSL_FLAG(std::vector<std::string>, choice, {},
          "constrain: an output allowed, exactly; repeat the flag for each (--choice yes "
          "--choice no).");
ABSL_FLAG(std::string, check, "",
          "constrain: a file of instances, one per line ('-': stdin), each checked token by "
          "token.");
ABSL_FLAG(bool, strict, false,
          "constrain: JSON schema strict mode: properties and items the schema does not name "
          "are refused.");
ABSL_FLAG(bool, any_order, false,
          "constrain: an object's properties in any order (default: the schema's order).");
ABSL_FLAG(bool, lenient, false,
          "constrain: JSON schema keywords the engine does not enforce are ignored instead of "
          "refused.");
ABSL_FLAG(bool, compact_json, false,
          "constrain: JSON exactly as Python's json.dumps writes it (', ' and ': '), no other "
          "whitespace.");
ABSL_FLAG(int, max_whitespace, 20,
          "constrain: most whitespace characters between two JSON tokens (>= 20).");
ABSL_DECLARE_FLAG(std::string, vocab);  // tokenize_cmd.cc
ABSL_DECLARE_FLAG(bool, json);          // generate_cmd.cc; here: any JSON object

namespace llm::cli {

absl::StatusOr<ConstrainArgs> ConstrainArgsFromFlags(const std::vector<std::string>& choices) {
  ConstrainArgs args;
  args.vocab = absl::GetFlag(FLAGS_vocab);
  if (args.vocab.empty()) return absl::InvalidArgumentError("--vocab FILE is required");
  args.check = absl::GetFlag(FLAGS_check);
  const std::string schema_file = absl::GetFlag(FLAGS_json_schema);
  const std::string regex = absl::GetFlag(FLAGS_regex);
  const std::string grammar_file = absl::GetFlag(FLAGS_grammar);
  const bool json = absl::GetFlag(FLAGS_json);
  const int kinds =
      !schema_file.empty() + !regex.empty() + !grammar_file.empty() + json + !choices.empty();
  if (kinds != 1) {
    return absl::InvalidArgumentError(
        "give exactly one of --json-schema FILE, --json, --regex RE, --grammar FILE or "
        "--choice A [--choice B ...]");
  }
  constrain::Spec& spec = args.spec;
  if (!schema_file.empty()) {
    spec.kind = constrain::Kind::kJsonSchema;
    absl::StatusOr<std::string> text = ReadFile(schema_file, "the JSON schema");
    if (!text.ok()) return text.status();
    spec.text = *std::move(text);
  } else if (json) {
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
  return args;
}

}  // namespace llm::cli
