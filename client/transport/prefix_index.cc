#include "client/transport/prefix_index.h"

#include <algorithm>

#include "absl/hash/hash.h"
#include "absl/types/span.h"

namespace llm::client {

std::vector<uint64_t> PrefixIndex::BlockHashes(std::span<const int32_t> prompt) const {
  const int64_t blocks =
      std::min<int64_t>(static_cast<int64_t>(prompt.size()) / kBlockTokens, max_blocks_);
  std::vector<uint64_t> hashes;
  hashes.reserve(static_cast<size_t>(blocks));
  uint64_t h = 0;
  for (int64_t b = 0; b < blocks; ++b) {
    h = absl::HashOf(h, absl::Span<const int32_t>(prompt.data() + b * kBlockTokens,
                                                  static_cast<size_t>(kBlockTokens)));
    hashes.push_back(h);
  }
  return hashes;
}

void PrefixIndex::Record(std::span<const int32_t> prompt, const std::string& replica_id) {
  const std::vector<uint64_t> hashes = BlockHashes(prompt);
  absl::MutexLock lock(&mu_);
  for (uint64_t h : hashes) {
    auto [it, added] = entries_.try_emplace(h);
    if (!added) lru_.erase(it->second.lru);
    lru_.push_front(h);
    it->second.replica_id = replica_id;
    it->second.lru = lru_.begin();
  }
  while (entries_.size() > capacity_) {
    entries_.erase(lru_.back());
    lru_.pop_back();
  }
}

PrefixIndex::Match PrefixIndex::Longest(std::span<const int32_t> prompt) {
  const std::vector<uint64_t> hashes = BlockHashes(prompt);
  absl::MutexLock lock(&mu_);
  for (size_t b = hashes.size(); b-- > 0;) {
    auto it = entries_.find(hashes[b]);
    if (it == entries_.end()) continue;
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    return Match{it->second.replica_id, static_cast<int64_t>(b + 1) * kBlockTokens};
  }
  return Match{};
}

size_t PrefixIndex::size() const {
  absl::MutexLock lock(&mu_);
  return entries_.size();
}

}  // namespace llm::client
