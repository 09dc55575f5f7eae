// The lines that `llm chat` reads: one user message each.
//
// When stdin and stdout are both terminals, with line editing from libedit
// (BSD licence; Debian's libedit-dev): the arrow keys move in the line, Home,
// End, Backspace, Delete, Ctrl-A/E/K/U/W edit it as in a shell, Up and Down
// walk the messages sent in this session (the history is kept in memory only,
// never in a file). Otherwise (piped or redirected input or output) plain
// lines from stdin, exactly as without it: a '> ' prompt on stdout only when
// stdin is a terminal.
//
// Ctrl-D on an empty line is the end of input. Ctrl-C while editing: libedit
// puts the terminal back in its normal mode and passes the signal on to the
// handler that was installed when Read() began (llm chat's: exit 130).
//
// Threads: one reader, used from one thread. Only one LineReader with line
// editing may exist at a time (libedit's readline interface is global).
#ifndef LLM_CLIENT_CLI_LINE_READER_H_
#define LLM_CLIENT_CLI_LINE_READER_H_

#include <optional>
#include <string>

namespace llm::cli {

class LineReader {
 public:
  LineReader();
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // Whether lines are edited (stdin and stdout are terminals).
  bool editing() const { return editing_; }
  // Whether stdin is a terminal (a person types).
  bool interactive() const { return interactive_; }

  // The next line, without its newline, after `prompt` (shown when
  // interactive()); nullopt at the end of input. A non-empty line is added to
  // the history when editing.
  std::optional<std::string> Read(const char* prompt);

 private:
  bool interactive_ = false;
  bool editing_ = false;
};

}  // namespace llm::cli

#endif  // LLM_CLIENT_CLI_LINE_READER_H_
