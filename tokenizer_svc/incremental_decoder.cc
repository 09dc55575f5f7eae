#include "tokenizer_svc/incremental_decoder.h"

#include <utility>

#include "common/status_macros.h"
#include "common/utf8.h"

namespace llm::tok {

absl::Status IncrementalDecoder::Add(std::span<const uint32_t> ids, std::string* out) {
  std::string buffer = held_;
  LLM_RETURN_IF_ERROR(tokenizer_.DecodeTo(ids, &buffer));
  const size_t complete = CompleteUtf8Prefix(buffer);
  out->append(buffer, 0, complete);
  held_.assign(buffer, complete, std::string::npos);
  return absl::OkStatus();
}

std::string IncrementalDecoder::Flush() { return std::exchange(held_, std::string()); }

}  // namespace llm::tok
