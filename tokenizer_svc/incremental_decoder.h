// Incremental detokenization for streaming: ids go in one (or a few) at a time,
// and only complete UTF-8 text comes out. Bytes of a character split across
// tokens are held until the character is complete; bytes that can never be
// valid UTF-8 are passed through rather than held forever. The concatenation
// of every Add() output and the final Flush() equals Decode() of all the ids.
//
// Ownership: borrows the Tokenizer, which must outlive the decoder.
// Threads: one decoder per stream; not thread-safe.
#ifndef LLM_TOKENIZER_SVC_INCREMENTAL_DECODER_H_
#define LLM_TOKENIZER_SVC_INCREMENTAL_DECODER_H_

#include <cstdint>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "tokenizer_svc/tokenizer.h"

namespace llm::tok {

class IncrementalDecoder {
 public:
  explicit IncrementalDecoder(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}

  // Appends the text that `ids` complete to *out. On an invalid id returns
  // InvalidArgument and changes neither *out nor the held bytes.
  absl::Status Add(std::span<const uint32_t> ids, std::string* out);

  // Returns the held bytes (an incomplete character at the end of the stream)
  // and resets the decoder.
  std::string Flush();

  size_t held_bytes() const { return held_.size(); }

 private:
  const Tokenizer& tokenizer_;
  std::string held_;
};

}  // namespace llm::tok

#endif  // LLM_TOKENIZER_SVC_INCREMENTAL_DECODER_H_
