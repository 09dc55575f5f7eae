// llm: the command-line client.
//   llm tokenize   --vocab PATH | --server ADDR   (JSON lines: text -> ids)
//   llm detokenize --vocab PATH | --server ADDR   (JSON lines: ids -> text)
#include <cstdio>
#include <cstring>
#include <string>

#include "client/tokenize_cmd.h"
#include "common/flags.h"

namespace {

constexpr char kUsage[] =
    "llm: client for the tokenizer and model services.\n"
    "\n"
    "Commands:\n"
    "  llm tokenize   (--vocab PATH | --server ADDR) [--jsonl] [--allowed-special LIST|all]\n"
    "                 [--add-bos] [--algorithm bpe|longest-match]\n"
    "      reads lines {\"text\": \"...\"} on stdin, writes {\"ids\": [...]} per line\n"
    "  llm detokenize (--vocab PATH | --server ADDR) [--jsonl]\n"
    "      reads lines {\"ids\": [...]} on stdin, writes {\"text\": \"...\"} per line\n"
    "\n"
    "Flags may be written --max-tokens or --max_tokens. Run 'llm --helpfull' for all flags.";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "help") == 0 ||
      std::strcmp(argv[1], "-h") == 0) {
    std::printf("%s\n", kUsage);
    return argc < 2 ? 2 : 0;
  }
  const std::string command = argv[1];
  // The command word is not a flag: parse the rest.
  argv[1] = argv[0];
  const auto positional = llm::ParseFlags(argc - 1, argv + 1, kUsage);
  if (positional.size() > 1) {
    std::fprintf(stderr, "llm %s: unexpected argument '%s'\n", command.c_str(),
                 positional[1].c_str());
    return 2;
  }
  if (command == "tokenize") return llm::cli::RunTokenize(stdin, stdout);
  if (command == "detokenize") return llm::cli::RunDetokenize(stdin, stdout);
  std::fprintf(stderr, "llm: unknown command '%s'\n\n%s\n", command.c_str(), kUsage);
  return 2;
}
