// Pre-tokenization: splits text into the pieces that BPE encodes separately.
//
// A Pretokenizer is a list of regular expressions applied in order: the first
// splits the text into its matches and the gaps between them, each next one
// splits every fragment the same way (llama.cpp's rule; a single regex is
// tiktoken's case). Gaps are kept, so no byte is ever dropped. The regexes use
// PCRE2 with JIT, Unicode properties and PCRE2_MATCH_INVALID_UTF: invalid UTF-8
// never matches and ends up in gaps, tokenized as bytes.
//
// `\s` follows the Unicode White_Space property as tiktoken's regex engine
// does (PCRE2 alone would leave out U+0085); `\S` is its complement.
//
// For the single regexes of cl100k_base and o200k_base (exact text), pieces
// decided by ASCII characters come from a hand-written scanner
// (ascii_scanner.h) and only the others from PCRE2; the pieces are the same.
//
// Threads: immutable after Create(); ForEachPiece may run concurrently.
// Cost: one JIT-compiled match per piece per regex (a few ns of scanning per
// byte instead, for ASCII pieces of the two patterns); no allocation per piece.
#ifndef LLM_TOKENIZER_SVC_PRETOKENIZER_H_
#define LLM_TOKENIZER_SVC_PRETOKENIZER_H_

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "tokenizer_svc/ascii_scanner.h"

namespace llm::tok {

// A named preset: the regex list and the merge shortcut that go with it.
struct PretokenizerPreset {
  std::string_view name;
  bool ignore_merges;
  std::vector<std::string_view> regexes;
};

// Presets for GGUF's tokenizer.ggml.pre names (llama.cpp's table, plus
// "smollm"); nullptr for an unknown name.
const PretokenizerPreset* FindGgufPreset(std::string_view name);
// All preset names, sorted (for error messages and docs).
std::vector<std::string_view> GgufPresetNames();

class Pretokenizer {
 public:
  // Compiles `regexes`; InvalidArgument naming the regex on a syntax error.
  // `ascii_scanner` false: PCRE2 for every piece (for tests).
  static absl::StatusOr<std::unique_ptr<Pretokenizer>> Create(std::vector<std::string> regexes,
                                                              bool ascii_scanner = true);
  ~Pretokenizer();

  // Calls `piece` for each piece of `text`, in order; the pieces concatenate
  // to `text`. Empty text gives no pieces.
  void ForEachPiece(std::string_view text, absl::FunctionRef<void(std::string_view)> piece) const;

  const std::vector<std::string>& regexes() const { return sources_; }

 private:
  struct Compiled;
  Pretokenizer() = default;
  void Split(size_t level, std::string_view fragment, void* match_data,
             absl::FunctionRef<void(std::string_view)> piece) const;
  // The single regex with the ASCII scanner in front.
  void ScanWithAscii(std::string_view text, void* match_data,
                     absl::FunctionRef<void(std::string_view)> piece) const;

  AsciiMatcher ascii_ = nullptr;  // set for one regex that the scanner knows
  std::vector<std::string> sources_;
  std::vector<std::unique_ptr<Compiled>> compiled_;
};

}  // namespace llm::tok

#endif  // LLM_TOKENIZER_SVC_PRETOKENIZER_H_
