// Command-line parsing shared by every binary: Abseil flags, with
// `--max-tokens` accepted as a spelling of `--max_tokens` (Abseil's names use
// underscores; people type dashes).
#ifndef LLM_COMMON_FLAGS_H_
#define LLM_COMMON_FLAGS_H_

#include <string>
#include <vector>

namespace llm {

// Sets the usage message, parses argv (exits on --help or a bad flag, as
// Abseil does) and returns the positional arguments, argv[0] first.
std::vector<std::string> ParseFlags(int argc, char** argv, const std::string& usage);

}  // namespace llm

#endif  // LLM_COMMON_FLAGS_H_
