#include "tokenizer_svc/pair_table.h"

#include <algorithm>
#include <string_view>
#include <utility>

namespace llm::tok {

PairTable PairTable::Build(const Trie& trie, const std::vector<std::string>& token_bytes) {
  // Collect the pairs first to size the table.
  std::vector<std::pair<uint64_t, uint32_t>> pairs;
  for (size_t id = 0; id < token_bytes.size(); ++id) {
    const std::string_view bytes = token_bytes[id];
    if (bytes.size() < 2) continue;
    const uint32_t merged = trie.Find(bytes);
    if (merged != id) continue;  // not a normal token, or a duplicate of a lower id
    if (merged >= kMaxId) return PairTable();
    // Walk the left part incrementally; look the right part up from the root.
    uint32_t node = Trie::kRoot;
    for (size_t k = 1; k < bytes.size(); ++k) {
      node = trie.Child(node, static_cast<uint8_t>(bytes[k - 1]));
      if (node == Trie::kNoNode) break;
      const uint32_t left = trie.Value(node);
      if (left == Trie::kNoValue) continue;
      const uint32_t right = trie.Find(bytes.substr(k));
      if (right == Trie::kNoValue) continue;
      if ((left | right) >= kMaxId) return PairTable();
      pairs.emplace_back(KeyOf(left, right), merged);
    }
  }
  std::vector<uint32_t> byte_pairs(256 * 256, Trie::kNoValue);
  for (int a = 0; a < 256; ++a) {
    const uint32_t node = trie.Child(Trie::kRoot, static_cast<uint8_t>(a));
    if (node == Trie::kNoNode) continue;
    for (int b = 0; b < 256; ++b) {
      const uint32_t child = trie.Child(node, static_cast<uint8_t>(b));
      if (child != Trie::kNoNode) byte_pairs[(a << 8) | b] = trie.Value(child);
    }
  }
  return FromPairs(pairs, std::move(byte_pairs));
}

PairTable PairTable::Build(const TokenIndex& index, const std::vector<std::string>& token_bytes,
                           std::span<const uint32_t> ids) {
  if (index.empty()) return PairTable();
  std::vector<std::pair<uint64_t, uint32_t>> pairs;
  std::vector<uint32_t> byte_pairs(256 * 256, Trie::kNoValue);
  // Every left and right part's slot of the token kAhead ids ahead is
  // prefetched, so that the cache misses of several tokens overlap; then the
  // lookups, the right part only where the left is a token.
  constexpr size_t kAhead = 8;  // 2-4 were 1.5 times slower, 16-32 the same
  const auto prefetch = [&](std::string_view bytes) {
    for (size_t k = 1; k < bytes.size(); ++k) {
      index.Prefetch(bytes.substr(0, k));
      index.Prefetch(bytes.substr(k));
    }
  };
  for (size_t i = 0; i < std::min(kAhead, ids.size()); ++i) prefetch(token_bytes[ids[i]]);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i + kAhead < ids.size()) prefetch(token_bytes[ids[i + kAhead]]);
    const uint32_t merged = ids[i];
    const std::string_view bytes = token_bytes[merged];
    if (bytes.size() < 2) continue;
    if (merged >= kMaxId) return PairTable();
    if (bytes.size() == 2) {
      byte_pairs[(static_cast<uint8_t>(bytes[0]) << 8) | static_cast<uint8_t>(bytes[1])] = merged;
    }
    for (size_t k = 1; k < bytes.size(); ++k) {
      const uint32_t left = index.Find(bytes.substr(0, k));
      if (left == Trie::kNoValue) continue;
      const uint32_t right = index.Find(bytes.substr(k));
      if (right == Trie::kNoValue) continue;
      if ((left | right) >= kMaxId) return PairTable();
      pairs.emplace_back(KeyOf(left, right), merged);
    }
  }
  return FromPairs(pairs, std::move(byte_pairs));
}

PairTable PairTable::FromPairs(const std::vector<std::pair<uint64_t, uint32_t>>& pairs,
                               std::vector<uint32_t> byte_pairs) {
  PairTable t;
  size_t capacity = 16;
  int bits = 4;
  while (capacity < 2 * pairs.size()) {
    capacity *= 2;
    ++bits;
  }
  t.slots_.assign(capacity, kEmpty);
  t.mask_ = capacity - 1;
  t.shift_ = 64 - bits;
  constexpr size_t kAhead = 8;  // prefetch distance, in pairs
  for (size_t i = 0; i < pairs.size(); ++i) {
    if (i + kAhead < pairs.size()) __builtin_prefetch(&t.slots_[t.Hash(pairs[i + kAhead].first)]);
    const auto [key, merged] = pairs[i];
    t.Insert(static_cast<uint32_t>(key >> kIdBits), static_cast<uint32_t>(key & kMaxId), merged);
  }
  t.byte_pairs_ = std::move(byte_pairs);
  return t;
}

void PairTable::Insert(uint32_t left, uint32_t right, uint32_t merged) {
  const uint64_t key = KeyOf(left, right);
  for (size_t i = Hash(key);; i = (i + 1) & mask_) {
    if (slots_[i] == kEmpty) {
      slots_[i] = (key << kIdBits) | merged;
      ++size_;
      return;
    }
    // A pair splits exactly one byte string, so it cannot appear twice.
    if ((slots_[i] >> kIdBits) == key) return;
  }
}

}  // namespace llm::tok
