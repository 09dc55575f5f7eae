// Loader for the seed's .tiktoken format: one token per line, the base64 of its
// bytes, a space, its rank (= id = merge priority):
//     IHRoYW4= 1109
// The pre-tokenizer pattern and the special tokens come from the JSON sidecar
// NAME.json beside NAME.tiktoken ({"pat_str": ..., "special_tokens": {...}}),
// or from TiktokenOptions, which take precedence.
//
// Rejected, with the file and line in the message: bad base64, a rank that is
// not a number or is absurd (> 2^24), a duplicate rank, duplicate token bytes,
// a missing rank below the largest one (unless a special token fills it), a
// token longer than 4 KiB, a special token colliding with a rank.
#ifndef LLM_TOKENIZER_SVC_TIKTOKEN_LOADER_H_
#define LLM_TOKENIZER_SVC_TIKTOKEN_LOADER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "tokenizer_svc/vocab.h"

namespace llm::tok {

struct TiktokenOptions {
  std::optional<std::string> pattern;
  std::vector<std::pair<std::string, uint32_t>> special_tokens;  // added to the sidecar's
  std::optional<std::string> name;
};

// Reads `path` and its sidecar (if present).
absl::StatusOr<Vocab> LoadTiktokenVocab(const std::string& path, const TiktokenOptions& options);

// Parses .tiktoken contents; `source` names it in errors. Needs options.pattern.
absl::StatusOr<Vocab> ParseTiktoken(std::string_view contents, std::string_view source,
                                    const TiktokenOptions& options);

// Parses a sidecar's JSON into `options` (fields already set there win).
absl::Status ParseTiktokenSidecar(std::string_view json, std::string_view source,
                                  TiktokenOptions* options);

}  // namespace llm::tok

#endif  // LLM_TOKENIZER_SVC_TIKTOKEN_LOADER_H_
