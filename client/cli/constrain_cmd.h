// `llm constrain`: compiles a constraint (a JSON schema, any JSON object, a
// regex, a GBNF grammar, choices) against a vocabulary file, without a model
// service, and checks instances with it token by token:
//   llm constrain --vocab MODEL.gguf (--json-schema FILE | --json | --regex RE |
//                 --grammar FILE | --choice A --choice B ...) [--check INSTANCES]
// prints {"index": i, "accepted": true|false} per instance line (each line's
// text as it stands, tokenized with the vocabulary's tokenizer; an instance
// the tokenizer refuses adds "error") and then the summary
// {"compiled": true, "instances": n, "accepted": k, "compile_ms": ...,
//  "mask_us_p50": ..., "mask_us_p99": ...}; a constraint that does not compile
// prints {"compiled": false, "error": "..."}, and the exit status is 0 either
// way (the tool ran). Exit status 2: bad usage, an unreadable file.
#ifndef LLM_CLIENT_CLI_CONSTRAIN_CMD_H_
#define LLM_CLIENT_CLI_CONSTRAIN_CMD_H_

#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "client/constrain/constraint.h"

namespace llm::cli {

struct ConstrainArgs {
  std::string vocab;  // a .gguf or .tiktoken file
  constrain::Spec spec;
  std::string check;  // the instances file, "-" for stdin; empty: compile only
};

// The arguments from the flags (constrain_flags.cc) --vocab, --json_schema FILE, --json,
// --regex RE, --grammar FILE, --check FILE, --strict, --any_order,
// --lenient, --compact_json, --max_whitespace, and `choices` (every --choice
// value, collected by main). InvalidArgument for usage errors: no vocabulary,
// not exactly one kind of constraint, a file that cannot be read.
absl::StatusOr<ConstrainArgs> ConstrainArgsFromFlags(const std::vector<std::string>& choices);

// The contents of the file at `path`; InvalidArgument "cannot read <what>
// <path>".
absl::StatusOr<std::string> ReadFile(const std::string& path, std::string_view what);

// The constraint the flags of generate, chat and constrain ask for:
// --json-schema FILE, --json-object, --regex RE, --grammar FILE or `choices`
// (every --choice), with --strict, --any-order, --lenient, --compact-json and
// --max-whitespace; nullopt when none is given. InvalidArgument for two
// kinds at once or a file that cannot be read.
absl::StatusOr<std::optional<constrain::Spec>> ConstraintSpecFromFlags(
    const std::vector<std::string>& choices, bool json_object);

// Runs the command, JSON lines to `out`, messages to `err`; the exit status.
int RunConstrain(const ConstrainArgs& args, std::FILE* out, std::FILE* err);

}  // namespace llm::cli

#endif  // LLM_CLIENT_CLI_CONSTRAIN_CMD_H_
