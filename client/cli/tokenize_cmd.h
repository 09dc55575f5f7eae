// `llm tokenize` and `llm detokenize`: JSON lines in, JSON lines out, in order.
//   tokenize:   {"text": "..."}  ->  {"ids": [...]}
//   detokenize: {"ids": [...]}   ->  {"text": "..."}
// In process with --vocab PATH, or through the tokenizer service with
// --server ADDR. A line that fails gives {"error": "..."} on its own output
// line (so outputs stay aligned with inputs) and a non-zero exit status: 2
// for a bad line (not JSON, no text or ids, a byte or id the vocabulary
// refuses), 1 when a call to the service failed (which wins over 2).
#ifndef LLM_CLIENT_CLI_TOKENIZE_CMD_H_
#define LLM_CLIENT_CLI_TOKENIZE_CMD_H_

#include <cstdio>

namespace llm::cli {

// Both read flags --vocab, --server, --jsonl, --add_bos, --allowed_special,
// --algorithm, --timeout (seconds per call; --deadline_ms, deprecated, in
// milliseconds). Return the process exit status.
int RunTokenize(std::FILE* in, std::FILE* out);
int RunDetokenize(std::FILE* in, std::FILE* out);

}  // namespace llm::cli

#endif  // LLM_CLIENT_CLI_TOKENIZE_CMD_H_
