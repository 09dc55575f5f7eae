// llm: the command-line client.
//   llm generate   --prompt TEXT [sampling flags]   (streams one answer)
//   llm chat       [sampling flags]                  (multi-turn, one session)
//   llm health     [--tokenizer ADDR] [--model ADDR] (grpc.health.v1 of both)
//   llm tokenize   --vocab PATH | --server ADDR   (JSON lines: text -> ids)
//   llm detokenize --vocab PATH | --server ADDR   (JSON lines: ids -> text)
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "client/generate_cmd.h"
#include "client/tokenize_cmd.h"
#include "common/flags.h"

namespace {

constexpr char kUsage[] =
    "llm: client for the tokenizer and model services.\n"
    "\n"
    "Commands:\n"
    "  llm generate --prompt TEXT [--tokenizer ADDR] [--model ADDR] [--max-tokens N]\n"
    "               [--temperature T] [--top-k K] [--top-p P] [--min-p M] [--seed S]\n"
    "               [--stop STR]... [--chat|--raw] [--system TEXT] [--json]\n"
    "               [--logits auto|full|fp16|top-n:N] [--timeout SECONDS]\n"
    "      streams the answer to one prompt (chat mode by default when the model has a\n"
    "      ChatML or Llama-3 chat template; --raw sends the prompt as it is). --json prints\n"
    "      {\"text\",\"token\",\"logprob\"} per token and a summary {\"tokens\",\n"
    "      \"prompt_tokens\",\"time_to_first_token_ms\",\"tokens_per_second\",\"stop_reason\"}.\n"
    "      Ctrl-C stops the answer; a second Ctrl-C exits.\n"
    "  llm chat [same flags, no --prompt]\n"
    "      multi-turn conversation on one model session: one user message per line of\n"
    "      stdin (a '> ' prompt on a terminal). Ctrl-C stops the current answer; Ctrl-C\n"
    "      again, or Ctrl-D, quits.\n"
    "  llm health [--tokenizer ADDR] [--model ADDR] [--wait SECONDS]\n"
    "      grpc.health.v1 status of both services; exit 0 when both are SERVING.\n"
    "  llm tokenize   (--vocab PATH | --server ADDR) [--jsonl] [--allowed-special LIST|all]\n"
    "                 [--add-bos] [--algorithm bpe|longest-match]\n"
    "      reads lines {\"text\": \"...\"} on stdin, writes {\"ids\": [...]} per line\n"
    "  llm detokenize (--vocab PATH | --server ADDR) [--jsonl]\n"
    "      reads lines {\"ids\": [...]} on stdin, writes {\"text\": \"...\"} per line\n"
    "\n"
    "TLS and tokens (every command that talks to a server): --tls_ca PATH (verify the\n"
    "servers; turns TLS on) [--tls_cert PATH --tls_key PATH] (client certificate, for\n"
    "mutual TLS) [--tls_server_name NAME] (name in the servers' certificates)\n"
    "[--auth_token_file PATH] (sent as 'authorization: Bearer <token>').\n"
    "\n"
    "Defaults: --tokenizer 127.0.0.1:50051 --model 127.0.0.1:50052 --max-tokens 256\n"
    "--temperature 0.8 --top-k 40 --top-p 0.95 --min-p 0.05 --seed -1 (random)\n"
    "--timeout 60. --temperature 0 is greedy. --stop may be repeated.\n"
    "--model also takes several replicas, HOST:PORT,HOST:PORT, or dns:///NAME:PORT (every\n"
    "address of NAME): sessions are spread over them, each call goes to its session's one.\n"
    "Exit status: 0 done; 1 a service failed or cannot be reached; 2 bad usage or values.\n"
    "Flags may be written --max-tokens or --max_tokens. Run 'llm --helpfull' for all flags.";

// Removes every "--stop X" / "--stop=X" from args and returns the values in
// order (an absl flag would keep only the last one).
std::vector<std::string> TakeStopFlags(std::vector<std::string>& args) {
  std::vector<std::string> stop;
  std::vector<std::string> rest;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      rest.insert(rest.end(), args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
      break;
    }
    if ((a == "--stop" || a == "-stop") && i + 1 < args.size()) {
      stop.push_back(args[++i]);
    } else if (a.rfind("--stop=", 0) == 0) {
      stop.push_back(a.substr(7));
    } else if (a.rfind("-stop=", 0) == 0) {
      stop.push_back(a.substr(6));
    } else {
      rest.push_back(a);
    }
  }
  args = std::move(rest);
  return stop;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "help") == 0 ||
      std::strcmp(argv[1], "-h") == 0) {
    std::printf("%s\n", kUsage);
    return argc < 2 ? 2 : 0;
  }
  const std::string command = argv[1];
  // The command word is not a flag: parse the rest, program name first.
  std::vector<std::string> args = {argv[0]};
  args.insert(args.end(), argv + 2, argv + argc);
  const std::vector<std::string> stop = TakeStopFlags(args);
  std::vector<char*> ptrs;
  for (std::string& a : args) ptrs.push_back(a.data());
  ptrs.push_back(nullptr);
  const auto positional = llm::ParseFlags(static_cast<int>(args.size()), ptrs.data(), kUsage);
  if (positional.size() > 1) {
    std::fprintf(stderr, "llm %s: unexpected argument '%s'\n", command.c_str(),
                 positional[1].c_str());
    return 2;
  }
  if (command == "generate") return llm::cli::RunGenerate(stop);
  if (command == "chat") return llm::cli::RunChat(stop);
  if (command == "health") return llm::cli::RunHealth();
  if (!stop.empty()) {
    std::fprintf(stderr, "llm %s: --stop is for generate and chat\n", command.c_str());
    return 2;
  }
  if (command == "tokenize") return llm::cli::RunTokenize(stdin, stdout);
  if (command == "detokenize") return llm::cli::RunDetokenize(stdin, stdout);
  std::fprintf(stderr, "llm: unknown command '%s'\n\n%s\n", command.c_str(), kUsage);
  return 2;
}
