// Implementation of BytePairEncode (bpe.h). Included from bpe.h only.
#ifndef LLM_TOKENIZER_SVC_BPE_INL_H_
#define LLM_TOKENIZER_SVC_BPE_INL_H_

#include <algorithm>
#include <functional>

namespace llm::tok::bpe_internal {

using Part = BpeScratch::Part;

// Rank and merged state of parts a and b, where b spans piece[b_begin, b_end).
// Returns false when they cannot merge.
inline bool PairRank(const BpeModel& m, std::string_view piece, const Part& a, uint32_t b_state,
                     uint32_t b_begin, uint32_t b_end, uint32_t* rank, uint32_t* merged) {
  if (m.merges != nullptr) {
    if (a.state == Trie::kNoValue || b_state == Trie::kNoValue) return false;
    auto it = m.merges->find(PairKey(a.state, b_state));
    if (it == m.merges->end()) return false;
    *rank = it->second.rank;
    *merged = it->second.result;
    return true;
  }
  // Concatenation rule: extend a's trie node by b's bytes (from the root when a
  // is a byte the trie lacks).
  const uint32_t node = a.state != Trie::kNoNode
                            ? m.trie->Walk(a.state, piece.substr(b_begin, b_end - b_begin))
                            : m.trie->Walk(Trie::kRoot, piece.substr(a.start, b_end - a.start));
  const uint32_t value = m.trie->Value(node);
  if (value == Trie::kNoValue) return false;
  *rank = value;
  *merged = node;
  return true;
}

inline uint32_t InitialState(const BpeModel& m, uint8_t byte) {
  return m.merges != nullptr ? m.byte_ids[byte] : m.trie->Child(Trie::kRoot, byte);
}

inline uint32_t FinalId(const BpeModel& m, uint32_t state) {
  return m.merges != nullptr ? state : m.trie->Value(state);
}

// tiktoken's loop: parts in a vector, scan for the minimum rank each round.
template <typename Emit>
void ScanMerge(const BpeModel& m, std::string_view piece, BpeScratch& s, Emit& emit) {
  auto& parts = s.parts;
  const auto n = static_cast<uint32_t>(piece.size());
  parts.clear();
  for (uint32_t i = 0; i < n; ++i) {
    parts.push_back({i, InitialState(m, static_cast<uint8_t>(piece[i])), kNoRank, 0, 0});
  }
  parts.push_back({n, Trie::kNoNode, kNoRank, 0, 0});  // sentinel: end of piece
  uint32_t unused = 0;
  for (size_t i = 0; i + 2 < parts.size(); ++i) {
    uint32_t r = kNoRank;
    if (PairRank(m, piece, parts[i], parts[i + 1].state, parts[i + 1].start, parts[i + 2].start,
                 &r, &unused)) {
      parts[i].rank = r;
    }
  }
  while (parts.size() > 2) {
    uint32_t best = kNoRank;
    size_t at = 0;
    for (size_t i = 0; i + 2 < parts.size(); ++i) {
      if (parts[i].rank < best) {
        best = parts[i].rank;
        at = i;
      }
    }
    if (best == kNoRank) break;
    uint32_t merged = 0;
    PairRank(m, piece, parts[at], parts[at + 1].state, parts[at + 1].start, parts[at + 2].start,
             &best, &merged);
    parts[at].state = merged;
    parts.erase(parts.begin() + static_cast<ptrdiff_t>(at) + 1);
    // Re-rank the merged part with its new right neighbour, and its left
    // neighbour with it.
    parts[at].rank = kNoRank;
    if (at + 2 < parts.size()) {
      uint32_t r = kNoRank;
      if (PairRank(m, piece, parts[at], parts[at + 1].state, parts[at + 1].start,
                   parts[at + 2].start, &r, &unused)) {
        parts[at].rank = r;
      }
    }
    if (at > 0) {
      uint32_t r = kNoRank;
      parts[at - 1].rank = kNoRank;
      if (PairRank(m, piece, parts[at - 1], parts[at].state, parts[at].start,
                   parts[at + 1].start, &r, &unused)) {
        parts[at - 1].rank = r;
      }
    }
  }
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    emit(FinalId(m, parts[i].state), parts[i].start, parts[i + 1].start);
  }
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
    const uint32_t state = i < n ? InitialState(m, static_cast<uint8_t>(piece[i])) : Trie::kNoNode;
    parts.push_back({i, state, kNoRank, i + 1, i - 1});
  }
  // parts[n] is the end sentinel; the last real part's next is n.
  auto end_of = [&](uint32_t i) { return parts[parts[i].next].start; };
  auto rerank = [&](uint32_t i) {
    parts[i].rank = kNoRank;
    const uint32_t j = parts[i].next;
    if (j >= n) return;
    uint32_t r = kNoRank;
    uint32_t unused = 0;
    if (PairRank(m, piece, parts[i], parts[j].state, parts[j].start, end_of(j), &r, &unused)) {
      parts[i].rank = r;
      heap.push_back((static_cast<uint64_t>(r) << 32) | i);
      std::push_heap(heap.begin(), heap.end(), std::greater<>());
    }
  };
  for (uint32_t i = 0; i + 1 < n; ++i) rerank(i);
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
    PairRank(m, piece, parts[i], parts[j].state, parts[j].start, end_of(j), &rank, &merged);
    parts[i].state = merged;
    parts[i].next = parts[j].next;
    parts[parts[j].next].prev = i;
    parts[j].rank = kNoRank;  // j is gone: its heap entries become stale
    rerank(i);
    if (parts[i].start > 0) rerank(parts[i].prev);
  }
  for (uint32_t i = 0; i < n; i = parts[i].next) {
    emit(FinalId(m, parts[i].state), parts[i].start, end_of(i));
  }
}

}  // namespace llm::tok::bpe_internal

namespace llm::tok {

template <typename Emit>
void BytePairEncode(const BpeModel& model, std::string_view piece, BpeScratch& scratch,
                    Emit&& emit) {
  if (piece.size() < kBpeHeapThreshold) {
    bpe_internal::ScanMerge(model, piece, scratch, emit);
  } else {
    bpe_internal::HeapMerge(model, piece, scratch, emit);
  }
}

}  // namespace llm::tok

#endif  // LLM_TOKENIZER_SVC_BPE_INL_H_
