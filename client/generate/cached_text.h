// TextStream over a TokenBytesCache (detokenizer.h): the text of a
// generation made here, with no call per token once the cache holds the
// tokens' bytes.
//
// Threads: one generation's. Ownership: borrows the cache, which must
// outlive the stream. Cost: Detokenizer::Add per token.
#ifndef LLM_CLIENT_GENERATE_CACHED_TEXT_H_
#define LLM_CLIENT_GENERATE_CACHED_TEXT_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "client/generate/detokenizer.h"
#include "client/generate/ports.h"
#include "client/generate/utf8_text.h"

namespace llm::client {

class CachedText : public TextStream {
 public:
  explicit CachedText(TokenBytesCache& cache) : detokenizer_(cache) {}
  absl::StatusOr<std::string> Add(int32_t token) override { return detokenizer_.Add(token); }
  absl::StatusOr<std::string> Finish() override { return SanitizeUtf8(detokenizer_.Flush()); }

 private:
  Detokenizer detokenizer_;
};

}  // namespace llm::client

#endif  // LLM_CLIENT_GENERATE_CACHED_TEXT_H_
