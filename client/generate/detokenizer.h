// Incremental detokenization in the client, over a cache of token bytes.
//
// The tokenizer service's Decode is, by its contract (tokenizer.proto), the
// concatenation of each token's exact bytes. So the client keeps each token's
// bytes in a TokenBytesCache shared by every generation of a Generator, and
// does the incremental part itself: only complete UTF-8 characters are
// released, the bytes of a character split across tokens are held until it
// completes, and bytes that can never become valid UTF-8 are released as
// U+FFFD. The Generator preloads the whole vocabulary when it connects
// (Decode with pieces, Preload()), so a generation detokenizes without any
// RPC; ids that were not preloaded (a server without pieces) are fetched on
// first sight, one Decode of that id through `fetch`.
//
// Threads: a TokenBytesCache is thread-safe (a process's generations share
// one: client/services.h); a Detokenizer belongs to one thread at a time.
// Cost: Get copies the token's bytes under a reader lock.
#ifndef LLM_CLIENT_GENERATE_DETOKENIZER_H_
#define LLM_CLIENT_GENERATE_DETOKENIZER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace llm::client {

class TokenBytesCache {
 public:
  // The bytes of one token id (e.g. the tokenizer service's Decode([id])).
  using Fetch = std::function<absl::StatusOr<std::string>(int32_t id)>;

  explicit TokenBytesCache(Fetch fetch) : fetch_(std::move(fetch)) {}

  // The bytes of `id`: preloaded, or fetched on the first request (outside
  // the lock: two threads may fetch the same id once each). The fetch's
  // errors are returned (and not cached); InvalidArgument for a negative id.
  absl::StatusOr<std::string> Get(int32_t id);

  // Stores bytes[i] as the bytes of id first_id + i (moved from `bytes`), so
  // that Get() answers them without a fetch. The caller vouches for them (the
  // tokenizer's Decode of those ids); an id already known is overwritten.
  // InvalidArgument, with nothing stored, for a negative first_id or a range
  // past the largest int32 id.
  absl::Status Preload(int32_t first_id, std::span<std::string> bytes);

  // Calls of `fetch` so far (failed ones too).
  int64_t fetches() const { return fetches_.load(std::memory_order_relaxed); }
  // Ids stored by Preload() so far (an id preloaded twice counts twice).
  int64_t preloaded() const { return preloaded_.load(std::memory_order_relaxed); }

 private:
  // Makes room for ids up to `id`.
  void Grow(size_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Fetch fetch_;
  mutable absl::Mutex mu_;
  std::vector<std::string> bytes_ ABSL_GUARDED_BY(mu_);  // by id
  std::vector<bool> known_ ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> fetches_{0};
  std::atomic<int64_t> preloaded_{0};
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

#endif  // LLM_CLIENT_GENERATE_DETOKENIZER_H_
