#include "tokenizer_svc/pair_table.h"

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
  for (const auto& [key, merged] : pairs) {
    t.Insert(static_cast<uint32_t>(key >> kIdBits), static_cast<uint32_t>(key & kMaxId), merged);
  }
  t.byte_pairs_.assign(256 * 256, Trie::kNoValue);
  for (int a = 0; a < 256; ++a) {
    const uint32_t node = trie.Child(Trie::kRoot, static_cast<uint8_t>(a));
    if (node == Trie::kNoNode) continue;
    for (int b = 0; b < 256; ++b) {
      const uint32_t child = trie.Child(node, static_cast<uint8_t>(b));
      if (child != Trie::kNoNode) t.byte_pairs_[(a << 8) | b] = trie.Value(child);
    }
  }
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
