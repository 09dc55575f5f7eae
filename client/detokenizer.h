// Incremental detokenization in the client, over a cache of token bytes.
//
// The tokenizer service's Decode is, by its contract (tokenizer.proto), the
// concatenation of each token's exact bytes. So the client asks for a
// token's bytes once (Decode of that one id, through `fetch`), keeps them in
// a TokenBytesCache shared by every generation of a Generator, and does the
// incremental part itself: only complete UTF-8 characters are released, the
// bytes of a character split across tokens are held until it completes, and
// bytes that can never become valid UTF-8 are released as U+FFFD. After the
// first few tokens a generation detokenizes without any RPC.
//
// Threads: a TokenBytesCache and a Detokenizer belong to one thread at a time.
#ifndef LLM_CLIENT_DETOKENIZER_H_
#define LLM_CLIENT_DETOKENIZER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace llm::client {

class TokenBytesCache {
 public:
  // The bytes of one token id (e.g. the tokenizer service's Decode([id])).
  using Fetch = std::function<absl::StatusOr<std::string>(int32_t id)>;

  explicit TokenBytesCache(Fetch fetch) : fetch_(std::move(fetch)) {}

  // The bytes of `id`, fetched on the first request. The fetch's errors are
  // returned (and not cached); InvalidArgument for a negative id.
  absl::StatusOr<const std::string*> Get(int32_t id);

  int64_t fetches() const { return fetches_; }

 private:
  Fetch fetch_;
  std::vector<std::string> bytes_;  // by id
  std::vector<bool> known_;
  int64_t fetches_ = 0;
};

// One stream of ids to text (one per generation).
class Detokenizer {
 public:
  // Borrows `cache`, which must outlive the detokenizer.
  explicit Detokenizer(TokenBytesCache& cache) : cache_(cache) {}

  // The complete UTF-8 text that `id` adds (possibly empty). On an error
  // nothing changes.
  absl::StatusOr<std::string> Add(int32_t id);

  // End of the stream: the held bytes (an incomplete character) as U+FFFD,
  // or "". Resets the detokenizer.
  std::string Flush();

 private:
  TokenBytesCache& cache_;
  std::string held_;
};

}  // namespace llm::client

#endif  // LLM_CLIENT_DETOKENIZER_H_
