// Prefix-aware routing of new sessions (issue 30; llm-d's prefix scorer): a
// bounded index, in this process, of which replica was last given a prompt
// beginning with which tokens. A model server's prefix cache keeps the KV
// of the prompts it computed, so a new session whose prompt shares a long
// prefix with one placed recently computes less on that replica.
//
// Keys are the prefixes of a prompt in whole blocks of kBlockTokens tokens
// (the first 64, the first 128, ..., at most max_blocks of them), each
// named by a chained hash; values are replica ids. Least recently used
// entries go first past `capacity`. A hash collision only routes a session
// to a replica that lacks its prefix: the cost of a miss, never a wrong
// answer.
//
// Threads: thread-safe (one mutex). Cost: Record and Longest hash the
// prompt's first max_blocks * 64 tokens once and look up one entry per
// block.
#ifndef LLM_CLIENT_TRANSPORT_PREFIX_INDEX_H_
#define LLM_CLIENT_TRANSPORT_PREFIX_INDEX_H_

#include <cstddef>
#include <cstdint>
#include <list>
#include <span>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace llm::client {

class PrefixIndex {
 public:
  static constexpr int64_t kBlockTokens = 64;

  explicit PrefixIndex(size_t capacity = 8192, int max_blocks = 64)
      : capacity_(capacity), max_blocks_(max_blocks) {}

  // Replica `replica_id` now holds `prompt` (its full blocks' prefixes).
  void Record(std::span<const int32_t> prompt, const std::string& replica_id);

  struct Match {
    std::string replica_id;  // empty: no recorded prefix
    int64_t tokens = 0;      // how many of the prompt's first tokens it matched
  };
  // The replica recorded for the longest prefix of `prompt` (whole blocks).
  Match Longest(std::span<const int32_t> prompt);

  size_t size() const;

 private:
  // The chained hashes of `prompt`'s first whole blocks, at most max_blocks_.
  std::vector<uint64_t> BlockHashes(std::span<const int32_t> prompt) const;

  struct Entry {
    std::string replica_id;
    std::list<uint64_t>::iterator lru;  // position in lru_ (front: most recent)
  };
  const size_t capacity_;
  const int max_blocks_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, Entry> entries_ ABSL_GUARDED_BY(mu_);
  std::list<uint64_t> lru_ ABSL_GUARDED_BY(mu_);
};

}  // namespace llm::client

#endif  // LLM_CLIENT_TRANSPORT_PREFIX_INDEX_H_
