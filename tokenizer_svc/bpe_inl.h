// Implementation of BytePairEncode (bpe.h). Included from bpe.h only.
#ifndef LLM_TOKENIZER_SVC_BPE_INL_H_
#define LLM_TOKENIZER_SVC_BPE_INL_H_

#include <algorithm>
#include <functional>

namespace llm::tok::bpe_internal {

using Part = BpeScratch::Part;

// Rank and merged id of parts a and b (token ids, Trie::kNoValue for a byte
// the vocabulary lacks), where a starts at byte a_begin and b ends at b_end.
// Returns false when they cannot merge.
inline bool PairRank(const BpeModel& m, std::string_view piece, uint32_t a, uint32_t b,
                     uint32_t a_begin, uint32_t b_end, uint32_t* rank, uint32_t* merged) {
  if (m.merges != nullptr) {
    if (a == Trie::kNoValue || b == Trie::kNoValue) return false;
    auto it = m.merges->find(PairKey(a, b));
    if (it == m.merges->end()) return false;
    *rank = it->second.rank;
    *merged = it->second.result;
    return true;
  }
  // Concatenation rule: the pair table when both parts are tokens, else the
  // trie on the concatenated bytes.
  uint32_t id = Trie::kNoValue;
  if (m.pairs != nullptr && !m.pairs->empty() && a != Trie::kNoValue && b != Trie::kNoValue) {
    id = m.pairs->Find(a, b);
  } else {
    id = m.trie->Find(piece.substr(a_begin, b_end - a_begin));
  }
  if (id == Trie::kNoValue) return false;
  *rank = id;
  *merged = id;
  return true;
}

// The pair table when the concatenation rule can use it, else nullptr.
inline const PairTable* UsablePairs(const BpeModel& m) {
  return m.merges == nullptr && m.pairs != nullptr && !m.pairs->empty() ? m.pairs : nullptr;
}

// Rank and merged id of the single bytes piece[i], piece[i + 1] (the initial
// parts): the direct byte-pair table when there is one.
inline bool InitialRank(const BpeModel& m, const PairTable* pairs, std::string_view piece,
                        uint32_t i, uint32_t a, uint32_t b, uint32_t* rank, uint32_t* merged) {
  if (pairs != nullptr) {
    const uint32_t id =
        pairs->FindBytes(static_cast<uint8_t>(piece[i]), static_cast<uint8_t>(piece[i + 1]));
    if (id == Trie::kNoValue) return false;
    *rank = id;
    *merged = id;
    return true;
  }
  return PairRank(m, piece, a, b, i, i + 2, rank, merged);
}

// tiktoken's loop on arrays on the stack: scan for the minimum rank each round,
// erase the merged part by shifting the (short) tails.
template <typename Emit>
void ScanMerge(const BpeModel& m, std::string_view piece, Emit& emit) {
  constexpr uint32_t kMax = kBpeHeapThreshold;
  const auto n = static_cast<uint32_t>(piece.size());
  uint32_t start[kMax + 1];  // start[i]: first byte of part i; start[k] == n
  uint32_t id[kMax];         // token id of part i
  uint32_t rank[kMax];       // rank of merging parts i and i + 1 (kNoRank: none)
  uint32_t merged[kMax];     // the id they merge into
  for (uint32_t i = 0; i < n; ++i) {
    start[i] = i;
    id[i] = m.byte_ids[static_cast<uint8_t>(piece[i])];
  }
  start[n] = n;
  uint32_t k = n;  // live parts
  const PairTable* pairs = UsablePairs(m);
  auto rerank = [&](uint32_t i) {
    rank[i] = kNoRank;
    PairRank(m, piece, id[i], id[i + 1], start[i], start[i + 2], &rank[i], &merged[i]);
  };
  for (uint32_t i = 0; i + 1 < k; ++i) {
    rank[i] = kNoRank;
    InitialRank(m, pairs, piece, i, id[i], id[i + 1], &rank[i], &merged[i]);
  }
  while (k > 1) {
    uint32_t best = kNoRank;
    uint32_t at = 0;
    for (uint32_t i = 0; i + 1 < k; ++i) {
      if (rank[i] < best) {
        best = rank[i];
        at = i;
      }
    }
    if (best == kNoRank) break;
    id[at] = merged[at];
    // Erase part at + 1.
    std::copy(start + at + 2, start + k + 1, start + at + 1);
    std::copy(id + at + 2, id + k, id + at + 1);
    std::copy(rank + at + 2, rank + k, rank + at + 1);
    std::copy(merged + at + 2, merged + k, merged + at + 1);
    --k;
    if (pairs != nullptr) {  // both lookups' cache misses at once
      if (at + 1 < k) pairs->Prefetch(id[at], id[at + 1]);
      if (at > 0) pairs->Prefetch(id[at - 1], id[at]);
    }
    if (at + 1 < k) {
      rerank(at);
    } else {
      rank[at] = kNoRank;
    }
    if (at > 0) rerank(at - 1);
  }
  for (uint32_t i = 0; i < k; ++i) emit(id[i], start[i], start[i + 1]);
}

// The same merges in O(n log n): a min-heap of (rank, part index) with lazy
// deletion over a doubly linked list of parts. Part indices grow with byte
// position, so the heap's tie-break on index is tiktoken's leftmost rule.
template <typename Emit>
void HeapMerge(const BpeModel& m, std::string_view piece, BpeScratch& s, Emit& emit) {
  auto& parts = s.parts;
  auto& heap = s.heap;
  const auto n = static_cast<uint32_t>(piece.size());
  parts.clear();
  heap.clear();
  for (uint32_t i = 0; i <= n; ++i) {
    const uint32_t state = i < n ? m.byte_ids[static_cast<uint8_t>(piece[i])] : Trie::kNoValue;
    parts.push_back({i, state, kNoRank, i + 1, i - 1});
  }
  // parts[n] is the end sentinel; the last real part's next is n.
  const PairTable* pairs = UsablePairs(m);
  auto end_of = [&](uint32_t i) { return parts[parts[i].next].start; };
  auto push = [&](uint32_t i, uint32_t r) {
    parts[i].rank = r;
    heap.push_back((static_cast<uint64_t>(r) << 32) | i);
    std::push_heap(heap.begin(), heap.end(), std::greater<>());
  };
  auto rerank = [&](uint32_t i) {
    parts[i].rank = kNoRank;
    const uint32_t j = parts[i].next;
    if (j >= n) return;
    uint32_t r = kNoRank;
    uint32_t unused = 0;
    if (PairRank(m, piece, parts[i].state, parts[j].state, parts[i].start, end_of(j), &r,
                 &unused)) {
      push(i, r);
    }
  };
  // The initial ranks go in unordered and are heapified once, in O(n).
  for (uint32_t i = 0; i + 1 < n; ++i) {
    uint32_t r = kNoRank;
    uint32_t unused = 0;
    if (InitialRank(m, pairs, piece, i, parts[i].state, parts[i + 1].state, &r, &unused)) {
      parts[i].rank = r;
      heap.push_back((static_cast<uint64_t>(r) << 32) | i);
    }
  }
  std::make_heap(heap.begin(), heap.end(), std::greater<>());
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>());
    const uint64_t top = heap.back();
    heap.pop_back();
    const auto i = static_cast<uint32_t>(top & 0xFFFFFFFFu);
    const auto r = static_cast<uint32_t>(top >> 32);
    if (parts[i].rank != r) continue;  // stale entry (part merged away or re-ranked)
    const uint32_t j = parts[i].next;
    uint32_t rank = 0;
    uint32_t merged = 0;
    PairRank(m, piece, parts[i].state, parts[j].state, parts[i].start, end_of(j), &rank, &merged);
    parts[i].state = merged;
    parts[i].next = parts[j].next;
    parts[parts[j].next].prev = i;
    parts[j].rank = kNoRank;  // j is gone: its heap entries become stale
    if (pairs != nullptr) {  // both lookups' cache misses at once
      if (parts[i].next < n) pairs->Prefetch(merged, parts[parts[i].next].state);
      if (parts[i].start > 0) pairs->Prefetch(parts[parts[i].prev].state, merged);
    }
    rerank(i);
    if (parts[i].start > 0) rerank(parts[i].prev);
  }
  for (uint32_t i = 0; i < n; i = parts[i].next) {
    emit(parts[i].state, parts[i].start, end_of(i));
  }
}

}  // namespace llm::tok::bpe_internal

namespace llm::tok {

template <typename Emit>
void BytePairEncode(const BpeModel& model, std::string_view piece, BpeScratch& scratch,
                    Emit&& emit) {
  if (piece.size() < kBpeHeapThreshold) {
    bpe_internal::ScanMerge(model, piece, emit);
  } else {
    bpe_internal::HeapMerge(model, piece, scratch, emit);
  }
}

}  // namespace llm::tok

#endif  // LLM_TOKENIZER_SVC_BPE_INL_H_
