// llm: the command-line client.
//   llm generate   --prompt TEXT [sampling flags]   (streams one answer)
//   llm chat       [sampling flags]                  (multi-turn, one session)
//   llm health     [--tokenizer ADDR] [--model ADDR] (grpc.health.v1 of both)
//   llm tokenize   --vocab PATH | --server ADDR   (JSON lines: text -> ids)
//   llm detokenize --vocab PATH | --server ADDR   (JSON lines: ids -> text)
//   llm constrain  --vocab PATH (--json-schema FILE | --regex RE | ...) [--check FILE]
//   llm --version, llm --help, llm COMMAND --help
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "client/cli/constrain_cmd.h"
#include "client/cli/generate_cmd.h"
#include "client/cli/tokenize_cmd.h"
#include "client/generate/stop_strings.h"
#include "common/flags.h"

namespace {

constexpr char kUsage[] =
    "llm: client for the tokenizer and model services.\n"
    "\n"
    "Commands:\n"
    "  llm generate --prompt TEXT [flags]   streams the answer to one prompt\n"
    "  llm chat [flags]                     a conversation on one model session, one user\n"
    "                                       message per line of stdin\n"
    "  llm health [flags]                   grpc.health.v1 status of both services\n"
    "  llm tokenize (--vocab PATH | --server ADDR) [flags]\n"
    "                                       JSON lines {\"text\"} on stdin -> {\"ids\"}\n"
    "  llm detokenize (--vocab PATH | --server ADDR) [flags]\n"
    "                                       JSON lines {\"ids\"} on stdin -> {\"text\"}\n"
    "  llm constrain --vocab PATH (--json-schema FILE | --json | --regex RE | --grammar FILE |\n"
    "                --choice A ...) [--check FILE]\n"
    "                                       compiles a constraint, checks instances against it\n"
    "  llm --version                        version and build type\n"
    "\n"
    "'llm COMMAND --help' lists the flags of a command. Flags may be written --max-tokens or\n"
    "--max_tokens. Exit status: 0 done; 1 a service failed or cannot be reached; 2 bad usage\n"
    "or values.";

// The flags every command that talks to a server takes (common/grpc/security_flags.cc).
const std::vector<std::string> kSecurityFlags = {"tls_ca", "tls_cert", "tls_key", "tls_server_name",
                                                 "auth_token_file"};

struct Command {
  const char* name;
  const char* usage;
  std::vector<std::string> flags;
};

std::vector<std::string> Concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

const std::vector<std::string> kGenerateFlags = {
    "prompt", "tokenizer", "model", "max_tokens", "temperature", "top_k", "top_p", "min_p", "seed",
    "stop", "chat", "raw", "template", "system", "json", "logits", "timeout", "wait_ready",
    "repeat_penalty", "ignore_eos", "detokenize", "lookahead", "speculate",
    // Structured output (constrain_flags.cc).
    "json_schema", "json_object", "regex", "grammar", "choice", "strict", "any_order", "lenient",
    "compact_json", "max_whitespace"};

const std::vector<Command>& Commands() {
  static const std::vector<Command> commands = {
      {"generate",
       "Usage: llm generate --prompt TEXT [flags]\n"
       "\n"
       "Streams the answer to one prompt (an empty --prompt reads it from stdin), formatted\n"
       "with the model's own chat template (Jinja), --template NAME|FILE, or its family's\n"
       "built-in one when the model has none (said on stderr); --raw sends the prompt as\n"
       "it is. --json prints {\"text\",\"token\",\"logprob\"} per token and a summary\n"
       "{\"tokens\",\"prompt_tokens\",\"time_to_first_token_ms\",\"tokens_per_second\",\n"
       "\"stop_reason\",\"session_rebuilds\",\"proposed_tokens\",\"accepted_tokens\",\n"
       "\"forced_tokens\"};\n"
       "stop_reason is eos, stop, length, context (the model's context is full) or cancelled.\n"
       "--speculate N proposes up to N tokens per decode step from n-gram matches in the\n"
       "conversation (speculative decoding: the same output, fewer steps when the answer\n"
       "repeats its input; the counts are the summary's proposed and accepted tokens).\n"
       "--stop takes the escapes \\n, \\r, \\t, \\\\, \\\" and \\' (--stop \"\\n\\n\" stops at a\n"
       "blank line) and may be repeated. Structured output: --json-schema FILE,\n"
       "--json-object, --regex RE, --grammar FILE (GBNF) or --choice A --choice B ... make\n"
       "the answer follow it (docs/structured_output.md; a constraint the engine refuses\n"
       "exits 2 naming why). Ctrl-C stops the answer; a second Ctrl-C exits\n"
       "(status 130). Exit status: 0 done; 1 a service failed or cannot be reached; 2 bad\n"
       "usage or values.",
       Concat(kGenerateFlags, kSecurityFlags)},
      {"chat",
       "Usage: llm chat [flags]\n"
       "\n"
       "A conversation on one model session: one user message per line of stdin (a '> '\n"
       "prompt on a terminal, with line editing and the session's history on Up/Down;\n"
       "piped input works the same); each turn prefills only its own tokens. Ctrl-C stops\n"
       "the current answer; Ctrl-C again, or Ctrl-D, quits. Takes the flags of 'llm\n"
       "generate' except --prompt; chat turn i uses --seed + i. --save FILE writes the\n"
       "conversation and its model session's snapshot to FILE after each answer and at the\n"
       "end; --resume FILE goes on with it (the session imported, not prefilled again, when\n"
       "the server can; otherwise its tokens are prefilled again, said on stderr).",
       Concat(Concat(std::vector<std::string>(kGenerateFlags.begin() + 1, kGenerateFlags.end()),
                     {"save", "resume"}),
              kSecurityFlags)},
      {"health",
       "Usage: llm health [--tokenizer ADDR] [--model ADDR] [--wait SECONDS]\n"
       "\n"
       "Checks the grpc.health.v1 status of the service each address must serve\n"
       "(llm.v1.Tokenizer at --tokenizer, llm.v1.Model at every replica --model names) and\n"
       "exits 0 when all are SERVING, 1 otherwise. Each address is SERVING, NOT SERVING (its\n"
       "server answered: still loading, draining, or serving another service) or UNREACHABLE\n"
       "(no server answered: nothing listens, a TLS handshake failed, a name resolves to no\n"
       "address). An empty --tokenizer or --model skips that service (a probe of one server).",
       Concat({"tokenizer", "model", "wait"}, kSecurityFlags)},
      {"tokenize",
       "Usage: llm tokenize (--vocab PATH | --server ADDR) [flags]\n"
       "\n"
       "Reads JSON lines {\"text\": \"...\"} on stdin and writes {\"ids\": [...]} per line, with\n"
       "the vocabulary file in process (--vocab: .gguf or .tiktoken) or through the tokenizer\n"
       "service (--server). A line that fails gives {\"error\": \"line N: ...\"} in its place.\n"
       "Exit status: 0 done; 1 a call to the service failed; 2 bad usage, or a bad line.",
       Concat({"vocab", "server", "jsonl", "allowed_special", "add_bos", "algorithm", "timeout",
               "deadline_ms"},
              kSecurityFlags)},
      {"detokenize",
       "Usage: llm detokenize (--vocab PATH | --server ADDR) [flags]\n"
       "\n"
       "Reads JSON lines {\"ids\": [...]} on stdin and writes {\"text\": \"...\"} per line;\n"
       "errors and exit status as for 'llm tokenize'.",
       Concat({"vocab", "server", "jsonl", "timeout", "deadline_ms"}, kSecurityFlags)},
      {"constrain",
       "Usage: llm constrain --vocab PATH (--json-schema FILE | --json-object | --regex RE |\n"
       "                     --grammar FILE | --choice A [--choice B ...]) [--check FILE]\n"
       "\n"
       "Compiles a constraint for structured generation against the vocabulary file (.gguf or\n"
       ".tiktoken), without a model service: a JSON schema, any JSON object (--json-object, or\n"
       "--json), a regex,\n"
       "a GBNF grammar (llama.cpp's format) or a list of choices. With --check, each line of\n"
       "FILE ('-': stdin) is an instance, its text as it stands, tokenized with the vocabulary\n"
       "and fed to the constraint token by token; it prints {\"index\": i, \"accepted\":\n"
       "true|false} per line, then {\"compiled\": true, \"instances\", \"accepted\",\n"
       "\"compile_ms\", \"mask_us_p50\", \"mask_us_p99\"}. A constraint that does not compile\n"
       "prints {\"compiled\": false, \"error\": \"...\"} naming what is not supported, and\n"
       "exits 0 all the same. JSON may have up to --max-whitespace whitespace characters\n"
       "between tokens (json.dumps' output passes). Exit status: 0 done; 2 bad usage or an\n"
       "unreadable file.",
       {"vocab", "json_schema", "json_object", "json", "regex", "grammar", "choice", "check",
        "strict", "any_order", "lenient", "compact_json", "max_whitespace"}},
  };
  return commands;
}

// Removes every "--NAME X" / "--NAME=X" (or with one dash) from args and
// returns the values in order (an absl flag would keep only the last one). A
// --NAME with no value is left for the flag parser to report.
std::vector<std::string> TakeRepeatedFlag(std::vector<std::string>& args, const std::string& name) {
  std::vector<std::string> values;
  std::vector<std::string> rest;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      rest.insert(rest.end(), args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
      break;
    }
    if ((a == "--" + name || a == "-" + name) && i + 1 < args.size()) {
      values.push_back(args[++i]);
    } else if (a.rfind("--" + name + "=", 0) == 0) {
      values.push_back(a.substr(name.size() + 3));
    } else if (a.rfind("-" + name + "=", 0) == 0) {
      values.push_back(a.substr(name.size() + 2));
    } else {
      rest.push_back(a);
    }
  }
  args = std::move(rest);
  return values;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string first = argc >= 2 ? argv[1] : "";
  if (argc < 2 || first == "--help" || first == "help" || first == "-h" || first == "--helpfull") {
    std::printf("%s\n", kUsage);
    return argc < 2 ? 2 : 0;
  }
  if (first == "--version" || first == "version") {
    std::printf("llm %s\n", llm::VersionString().c_str());
    return 0;
  }
  const Command* command = nullptr;
  for (const Command& c : Commands()) {
    if (first == c.name) command = &c;
  }
  if (command == nullptr) {
    std::vector<std::string> names;
    for (const Command& c : Commands()) names.push_back(c.name);
    const std::string near = llm::NearestName(first, names);
    if (first.rfind('-', 0) == 0) {
      std::fprintf(stderr, "llm: a command comes first: llm COMMAND [flags] (see llm --help)\n");
    } else if (!near.empty()) {
      std::fprintf(stderr, "llm: unknown command '%s'; did you mean '%s'?\n", first.c_str(),
                   near.c_str());
    } else {
      std::fprintf(stderr, "llm: unknown command '%s' (see llm --help)\n", first.c_str());
    }
    return 2;
  }
  // The command word is not a flag: parse the rest, program name first.
  std::vector<std::string> args = {argv[0]};
  args.insert(args.end(), argv + 2, argv + argc);
  std::vector<std::string> stop = TakeRepeatedFlag(args, "stop");
  for (std::string& s : stop) s = llm::client::ProcessEscapes(s);
  const std::vector<std::string> choices = TakeRepeatedFlag(args, "choice");
  llm::FlagParseOptions options;
  options.program = std::string("llm ") + command->name;
  options.usage = command->usage;
  options.flags = command->flags;
  const std::vector<std::string> positional = llm::ParseFlagsOrExit(args, options);
  if (positional.size() > 1) {
    std::fprintf(stderr, "llm %s: unexpected argument '%s'\n", command->name,
                 positional[1].c_str());
    return 2;
  }
  const std::string name = command->name;
  if (name == "constrain") {
    if (!stop.empty()) {
      std::fprintf(stderr, "llm constrain: --stop is for generate and chat\n");
      return 2;
    }
    absl::StatusOr<llm::cli::ConstrainArgs> constrain_args =
        llm::cli::ConstrainArgsFromFlags(choices);
    if (!constrain_args.ok()) {
      std::fprintf(stderr, "llm constrain: %s\n",
                   std::string(constrain_args.status().message()).c_str());
      return 2;
    }
    return llm::cli::RunConstrain(*constrain_args, stdout, stderr);
  }
  if (name == "generate") return llm::cli::RunGenerate(stop, choices);
  if (name == "chat") return llm::cli::RunChat(stop, choices);
  if (!choices.empty()) {
    std::fprintf(stderr, "llm %s: --choice is for generate, chat and constrain\n", command->name);
    return 2;
  }
  if (!stop.empty()) {
    std::fprintf(stderr, "llm %s: --stop is for generate and chat\n", command->name);
    return 2;
  }
  if (name == "health") return llm::cli::RunHealth();
  if (name == "tokenize") return llm::cli::RunTokenize(stdin, stdout);
  return llm::cli::RunDetokenize(stdin, stdout);
}
