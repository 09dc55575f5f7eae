#include "client/cli/line_reader.h"

#include <editline/readline.h>
#include <langinfo.h>
#include <unistd.h>

#include <clocale>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>

namespace llm::cli {
namespace {

// libedit reads and edits characters, not bytes, in the locale's encoding: in
// the "C" locale a UTF-8 character would come back mangled. Messages are
// UTF-8, so the character type is the environment's when it is UTF-8, else
// C.UTF-8.
void UseUtf8Characters() {
  const char* set = std::setlocale(LC_CTYPE, "");
  if (set != nullptr && std::strcmp(nl_langinfo(CODESET), "UTF-8") == 0) return;
  std::setlocale(LC_CTYPE, "C.UTF-8");
}

}  // namespace

LineReader::LineReader()
    : interactive_(isatty(STDIN_FILENO) != 0),
      editing_(interactive_ && isatty(STDOUT_FILENO) != 0) {
  if (!editing_) return;
  UseUtf8Characters();
  rl_instream = stdin;
  rl_outstream = stdout;
  using_history();
}

LineReader::~LineReader() {
  if (editing_) clear_history();
}

std::optional<std::string> LineReader::Read(const char* prompt) {
  if (editing_) {
    char* line = readline(prompt);
    if (line == nullptr) return std::nullopt;
    std::string text(line);
    std::free(line);
    if (!text.empty()) add_history(text.c_str());
    return text;
  }
  if (interactive_) {
    std::fputs(prompt, stdout);
    std::fflush(stdout);
  }
  std::string text;
  if (!std::getline(std::cin, text)) return std::nullopt;
  return text;
}

}  // namespace llm::cli
