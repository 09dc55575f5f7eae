// PairTable: (left token id, right token id) -> merged token id, for the
// concatenation-rank rule (tiktoken): a pair merges when the concatenation of
// its two tokens' bytes is itself a token, whose id is the pair's rank.
//
// Built once by trying every split of every token: (Find(bytes[:k]),
// Find(bytes[k:])) -> Find(bytes), with the lookups in the TokenIndex (one
// hash probe each, all of a token's probes prefetched together) or, for
// vocabularies that have no index, in a frozen Trie of the vocabulary (a few
// dependent memory reads per byte: 4-5 times slower). Ids are the canonical
// ones (a duplicated byte string maps to its lowest id), the same ids the
// merge loop carries, so Find(l, r) equals trie.Find(bytes(l) + bytes(r)) for
// every pair of tokens l, r; both builds give the same table.
//
// Layout: one flat open-addressing array of 8-byte entries (left, right and
// merged id packed in 21 bits each), linear probing, load factor at most 1/2;
// a lookup is one hash and usually one cache line. Only vocabularies whose ids
// fit in 21 bits can be represented; Build() returns an empty table otherwise
// (empty() is true and callers keep using the trie).
// Pairs of two single bytes, the first pairs of every merge loop, also have a
// direct 256 x 256 table (FindBytes), which stays in the CPU's L2 cache where
// the hash table's probes go to L3 or memory.
// Memory: 16 bytes per pair rounded up to a power of two (cl100k_base: 233 K
// pairs, 4 MiB; o200k_base: 446 K pairs, 8 MiB), plus 256 KiB for byte
// pairs. Build cost: 2 (length - 1) index probes per token, overlapped
// (~70 ms for o200k_base's 200 K tokens), or O(sum of squared token lengths)
// trie steps from the trie (~0.25 s).
// Threads: immutable after Build(); Find may run concurrently.
#ifndef LLM_TOKENIZER_SVC_PAIR_TABLE_H_
#define LLM_TOKENIZER_SVC_PAIR_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer_svc/token_index.h"
#include "tokenizer_svc/trie.h"

namespace llm::tok {

class PairTable {
 public:
  static constexpr uint32_t kIdBits = 21;
  // Ids must be below this (the all-ones pattern marks empty slots).
  static constexpr uint32_t kMaxId = (1u << kIdBits) - 1;

  PairTable() = default;

  // token_bytes[id] is token id's byte string; only ids whose bytes the trie
  // maps back to that id take part. Returns an empty table when any trie
  // value is >= kMaxId.
  static PairTable Build(const Trie& trie, const std::vector<std::string>& token_bytes);
  // The same table from the token index: `ids` are the ids the index maps
  // back to themselves (TokenIndex::Build's `canonical`), in increasing
  // order. Returns an empty table when `index` is empty or any id involved is
  // >= kMaxId.
  static PairTable Build(const TokenIndex& index, const std::vector<std::string>& token_bytes,
                         std::span<const uint32_t> ids);

  // The merged id of (left, right), or Trie::kNoValue when their
  // concatenation is not a token (or either id is >= kMaxId).
  uint32_t Find(uint32_t left, uint32_t right) const {
    if ((left | right) >= kMaxId || slots_.empty()) return Trie::kNoValue;
    const uint64_t key = KeyOf(left, right);
    for (size_t i = Hash(key);; i = (i + 1) & mask_) {
      const uint64_t slot = slots_[i];
      if ((slot >> kIdBits) == key) return static_cast<uint32_t>(slot & kMaxId);
      if (slot == kEmpty) return Trie::kNoValue;
    }
  }

  // The id of the token made of bytes a, b (trie.Find of those two bytes,
  // whether or not a and b are tokens themselves), or Trie::kNoValue.
  // Requires !empty().
  uint32_t FindBytes(uint8_t a, uint8_t b) const { return byte_pairs_[(a << 8) | b]; }

  // Starts loading Find(left, right)'s first slot into the CPU cache, so that
  // two or more lookups known in advance overlap their memory latency.
  void Prefetch(uint32_t left, uint32_t right) const {
    if ((left | right) >= kMaxId || slots_.empty()) return;
    __builtin_prefetch(&slots_[Hash(KeyOf(left, right))]);
  }

  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};

  static uint64_t KeyOf(uint32_t left, uint32_t right) {
    return (static_cast<uint64_t>(left) << kIdBits) | right;
  }
  size_t Hash(uint64_t key) const {
    return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_);
  }
  void Insert(uint32_t left, uint32_t right, uint32_t merged);
  // The table of `pairs` (KeyOf(left, right), merged) and `byte_pairs`.
  static PairTable FromPairs(const std::vector<std::pair<uint64_t, uint32_t>>& pairs,
                             std::vector<uint32_t> byte_pairs);

  std::vector<uint64_t> slots_;       // (KeyOf(left, right) << kIdBits) | merged, or kEmpty
  std::vector<uint32_t> byte_pairs_;  // [a << 8 | b]: id of bytes a, b
  size_t mask_ = 0;
  int shift_ = 64;
  size_t size_ = 0;
};

}  // namespace llm::tok

#endif  // LLM_TOKENIZER_SVC_PAIR_TABLE_H_
