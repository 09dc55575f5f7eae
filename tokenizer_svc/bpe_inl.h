// Implementation of BytePairEncode (bpe.h). Included from bpe.h only.
#ifndef LLM_TOKENIZER_SVC_BPE_INL_H_
#define LLM_TOKENIZER_SVC_BPE_INL_H_

#include <algorithm>
#include <functional>
#include <utility>

namespace llm::tok {

inline void FlatHeap::Push(uint32_t rank, uint32_t index) {
  const uint64_t v = (static_cast<uint64_t>(rank) << 32) | index;
  size_t i = h_.size();
  h_.push_back(v);
  while (i > 0) {
    const size_t p = (i - 1) / 4;
    if (h_[p] <= v) break;
    h_[i] = h_[p];
    i = p;
  }
  h_[i] = v;
}

inline std::pair<uint32_t, uint32_t> FlatHeap::Pop() {
  const uint64_t top = h_[0];
  const uint64_t v = h_.back();
  h_.pop_back();
  uint64_t* h = h_.data();
  const size_t n = h_.size();
  size_t i = 0;
  while (n > 0) {
    const size_t c = 4 * i + 1;
    if (c + 4 <= n) {
      // The 16 grandchildren are adjacent (two cache lines): fetch them while
      // the children are compared.
      const size_t g = 4 * c + 1;
      if (g < n) {
        __builtin_prefetch(h + g);
        __builtin_prefetch(h + g + 8);
      }
      // The smallest of four children without branches (which one wins is
      // unpredictable).
      const bool b1 = h[c + 1] < h[c];
      const uint64_t v1 = b1 ? h[c + 1] : h[c];
      const bool b2 = h[c + 3] < h[c + 2];
      const uint64_t v2 = b2 ? h[c + 3] : h[c + 2];
      const bool b3 = v2 < v1;
      const uint64_t best_v = b3 ? v2 : v1;
      const size_t best = b3 ? c + 2 + b2 : c + b1;
      if (v <= best_v) break;
      h[i] = best_v;
      i = best;
      continue;
    }
    if (c >= n) break;
    size_t best = c;
    uint64_t best_v = h[c];
    for (size_t k = c + 1; k < n; ++k) {
      if (h[k] < best_v) {
        best_v = h[k];
        best = k;
      }
    }
    if (v <= best_v) break;
    h[i] = best_v;
    i = best;
  }
  if (n > 0) h[i] = v;
  return {static_cast<uint32_t>(top >> 32), static_cast<uint32_t>(top & 0xFFFFFFFFu)};
}

inline void MergeQueue::Clear() {
  for (size_t k = 0; k < used_; ++k) {
    per_rank_[k].run.clear();
    per_rank_[k].head = 0;
    per_rank_[k].overflow.clear();
  }
  used_ = 0;
  ranks_.clear();
  slot_of_.clear();
  memo_.fill(0);
}

inline size_t MergeQueue::ReservedBytes() const {
  size_t bytes = ranks_.capacity() * sizeof(uint32_t) + per_rank_.capacity() * sizeof(PerRank) +
                 slot_of_.capacity() * (sizeof(uint32_t) * 2 + 1);
  for (const PerRank& q : per_rank_) {
    bytes += (q.run.capacity() + q.overflow.capacity()) * sizeof(uint32_t);
  }
  return bytes;
}

inline MergeQueue::PerRank& MergeQueue::Find(uint32_t rank) {
  uint64_t& memo = memo_[rank & 255];
  if ((memo >> 32) == uint64_t{rank} + 1) return per_rank_[memo & 0xFFFFFFFFu];
  auto [it, fresh] = slot_of_.try_emplace(rank, static_cast<uint32_t>(used_));
  if (fresh) {
    if (used_ == per_rank_.size()) per_rank_.emplace_back();
    ++used_;
  }
  memo = ((uint64_t{rank} + 1) << 32) | it->second;
  return per_rank_[it->second];
}

inline void MergeQueue::Push(uint32_t rank, uint32_t index) {
  PerRank& q = Find(rank);
  const bool was_empty = q.head == q.run.size() && q.overflow.empty();
  if (q.head == q.run.size() || index > q.run.back()) {
    q.run.push_back(index);
  } else {
    q.overflow.push_back(index);
    std::push_heap(q.overflow.begin(), q.overflow.end(), std::greater<>());
  }
  if (was_empty) {
    ranks_.push_back(rank);
    std::push_heap(ranks_.begin(), ranks_.end(), std::greater<>());
  }
}

inline std::pair<uint32_t, uint32_t> MergeQueue::Pop() {
  const uint32_t rank = ranks_.front();
  PerRank& q = Find(rank);
  uint32_t index = 0;
  if (!q.overflow.empty() && (q.head == q.run.size() || q.overflow.front() < q.run[q.head])) {
    index = q.overflow.front();
    std::pop_heap(q.overflow.begin(), q.overflow.end(), std::greater<>());
    q.overflow.pop_back();
  } else {
    index = q.run[q.head++];
    if (q.head == q.run.size()) {
      q.run.clear();
      q.head = 0;
    }
  }
  if (q.head == q.run.size() && q.overflow.empty()) {
    std::pop_heap(ranks_.begin(), ranks_.end(), std::greater<>());
    ranks_.pop_back();
  }
  return {rank, index};
}

}  // namespace llm::tok

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
  // token index (or the trie) on the concatenated bytes.
  uint32_t id = Trie::kNoValue;
  if (m.pairs != nullptr && !m.pairs->empty() && a != Trie::kNoValue && b != Trie::kNoValue) {
    id = m.pairs->Find(a, b);
  } else {
    const std::string_view bytes = piece.substr(a_begin, b_end - a_begin);
    id = m.tokens != nullptr ? m.tokens->Find(bytes) : m.trie->Find(bytes);
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

// tiktoken's loop on arrays on the stack. Part i starts at byte i; a part
// merged away stays in the arrays, unlinked, with rank kNoRank, so a merge
// shifts nothing and each round's minimum is one pass over a padded array
// that the compiler vectorizes (then the first index holding it: leftmost).
template <typename Emit>
void ScanMerge(const BpeModel& m, std::string_view piece, Emit& emit) {
  constexpr uint32_t kMax = kBpeHeapThreshold;
  static_assert(kMax % 8 == 0);
  const auto n = static_cast<uint32_t>(piece.size());
  const uint32_t padded = (n + 7) & ~7u;  // <= kMax
  uint32_t id[kMax];                      // token id of part i
  uint32_t rank[kMax];                    // rank of merging part i with the next live part
  uint32_t merged[kMax];                  // the id they merge into
  uint32_t next[kMax];                    // next live part (n: none)
  uint32_t prev[kMax];                    // previous live part
  for (uint32_t i = 0; i < n; ++i) {
    id[i] = m.byte_ids[static_cast<uint8_t>(piece[i])];
    next[i] = i + 1;
    prev[i] = i - 1;
  }
  for (uint32_t i = n > 0 ? n - 1 : 0; i < padded; ++i) rank[i] = kNoRank;
  const PairTable* pairs = UsablePairs(m);
  for (uint32_t i = 0; i + 1 < n; ++i) {
    rank[i] = kNoRank;
    InitialRank(m, pairs, piece, i, id[i], id[i + 1], &rank[i], &merged[i]);
  }
  auto rerank = [&](uint32_t i) {
    rank[i] = kNoRank;
    const uint32_t j = next[i];
    if (j >= n) return;
    PairRank(m, piece, id[i], id[j], i, next[j], &rank[i], &merged[i]);
  };
  for (;;) {
    uint32_t best = kNoRank;
    for (uint32_t i = 0; i < padded; ++i) best = std::min(best, rank[i]);
    if (best == kNoRank) break;
    uint32_t at = 0;
    while (rank[at] != best) ++at;
    const uint32_t j = next[at];
    id[at] = merged[at];
    next[at] = next[j];
    if (next[j] < n) prev[next[j]] = at;
    rank[j] = kNoRank;
    if (pairs != nullptr) {  // both lookups' cache misses at once
      if (next[at] < n) pairs->Prefetch(id[at], id[next[at]]);
      if (at > 0) pairs->Prefetch(id[prev[at]], id[at]);
    }
    rerank(at);
    if (at > 0) rerank(prev[at]);
  }
  for (uint32_t i = 0; i < n; i = next[i]) emit(id[i], i, next[i]);
}

// The same merges: a MergeQueue of (rank, part index) with lazy deletion over
// a doubly linked list of parts. Part indices grow with byte position, so the
// queue's tie-break on index is tiktoken's leftmost rule.
template <typename Queue, typename Emit>
void HeapMerge(const BpeModel& m, std::string_view piece, BpeScratch& s, Queue& queue, Emit& emit) {
  auto& parts = s.parts;
  const auto n = static_cast<uint32_t>(piece.size());
  parts.resize(n + 1);
  queue.Clear();
  for (uint32_t i = 0; i < n; ++i) {
    parts[i] = {m.byte_ids[static_cast<uint8_t>(piece[i])], kNoRank, i + 1, i - 1};
  }
  // parts[n] is the end sentinel; the last real part's next is n.
  parts[n] = {Trie::kNoValue, kNoRank, n + 1, n - 1};
  const PairTable* pairs = UsablePairs(m);
  auto rerank = [&](uint32_t i) {
    parts[i].rank = kNoRank;
    const uint32_t j = parts[i].next;
    if (j >= n) return;
    uint32_t r = kNoRank;
    uint32_t unused = 0;
    if (PairRank(m, piece, parts[i].state, parts[j].state, i, parts[j].next, &r, &unused)) {
      parts[i].rank = r;
      queue.Push(r, i);
    }
  };
  for (uint32_t i = 0; i + 1 < n; ++i) {
    uint32_t r = kNoRank;
    uint32_t unused = 0;
    if (InitialRank(m, pairs, piece, i, parts[i].state, parts[i + 1].state, &r, &unused)) {
      parts[i].rank = r;
      queue.Push(r, i);
    }
  }
  while (!queue.empty()) {
    const auto [r, i] = queue.Pop();
    if (parts[i].rank != r) continue;  // stale entry (part merged away or re-ranked)
    const uint32_t j = parts[i].next;
    // Under the concatenation rule the rank is the merged id; a merge list
    // needs its entry again.
    uint32_t merged = r;
    if (m.merges != nullptr) {
      uint32_t rank = 0;
      PairRank(m, piece, parts[i].state, parts[j].state, i, parts[j].next, &rank, &merged);
    }
    parts[i].state = merged;
    parts[i].next = parts[j].next;
    parts[parts[j].next].prev = i;
    parts[j].rank = kNoRank;  // j is gone: its heap entries become stale
    if (pairs != nullptr) {   // both lookups' cache misses at once
      if (parts[i].next < n) pairs->Prefetch(merged, parts[parts[i].next].state);
      if (i > 0) pairs->Prefetch(parts[parts[i].prev].state, merged);
    }
    rerank(i);
    if (i > 0) rerank(parts[i].prev);
  }
  for (uint32_t i = 0; i < n; i = parts[i].next) emit(parts[i].state, i, parts[i].next);
}

// HeapMerge's merges on 8-byte parts (BpeScratch::LongPart) with a
// MergeQueue, for long pieces: the same steps on a packed layout. Returns
// false, having emitted nothing, when an id or rank does not fit in 24 bits or
// a part would outgrow 255 bytes (a vocabulary with tokens that long); the
// caller then runs HeapMerge.
template <typename Emit>
bool LongMerge(const BpeModel& m, std::string_view piece, BpeScratch& s, Emit& emit) {
  auto& parts = s.long_parts;
  MergeQueue& queue = s.queue;
  const auto n = static_cast<uint32_t>(piece.size());
  if (parts.size() < n) parts.resize(n);
  queue.Clear();
  constexpr uint32_t kLow = 0xFF;
  auto id = [](uint32_t id_len) {
    const uint32_t v = id_len >> 8;
    return v == kLongNone ? Trie::kNoValue : v;
  };
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t b = m.byte_ids[static_cast<uint8_t>(piece[i])];
    if (b != Trie::kNoValue && b >= kLongNone) return false;
    parts[i].id_len = (b == Trie::kNoValue ? kLongNone : b) << 8 | 1;
    parts[i].rank_prev = kLongNone << 8 | 1;
  }
  const PairTable* pairs = UsablePairs(m);
  // Sets part i's rank with the next live part and queues it; false when the
  // rank does not fit.
  auto rerank = [&](uint32_t i) {
    auto& a = parts[i];
    const uint32_t j = i + (a.id_len & kLow);
    uint32_t r = kNoRank;
    uint32_t unused = 0;
    if (j >= n || !PairRank(m, piece, id(a.id_len), id(parts[j].id_len), i,
                            j + (parts[j].id_len & kLow), &r, &unused)) {
      r = kLongNone;
    } else if (r >= kLongNone) {
      return false;
    } else {
      queue.Push(r, i);
    }
    a.rank_prev = r << 8 | (a.rank_prev & kLow);
    return true;
  };
  for (uint32_t i = 0; i + 1 < n; ++i) {
    uint32_t r = kNoRank;
    uint32_t unused = 0;
    if (InitialRank(m, pairs, piece, i, id(parts[i].id_len), id(parts[i + 1].id_len), &r,
                    &unused)) {
      if (r >= kLongNone) return false;
      parts[i].rank_prev = r << 8 | 1;
      queue.Push(r, i);
    }
  }
  while (!queue.empty()) {
    const auto [r, i] = queue.Pop();
    auto& a = parts[i];
    if ((a.rank_prev >> 8) != r) continue;  // stale entry (merged away or re-ranked)
    const uint32_t j = i + (a.id_len & kLow);
    const uint32_t len = (a.id_len & kLow) + (parts[j].id_len & kLow);
    if (len > kLow) return false;
    // Under the concatenation rule the rank is the merged id; a merge list
    // needs its entry again.
    uint32_t merged = r;
    if (m.merges != nullptr) {
      uint32_t rank = 0;
      PairRank(m, piece, id(a.id_len), id(parts[j].id_len), i, j + (parts[j].id_len & kLow), &rank,
               &merged);
      if (merged >= kLongNone) return false;
    }
    a.id_len = merged << 8 | len;
    parts[j].rank_prev |= kLongNone << 8;  // j is gone: its entries become stale
    const uint32_t k = i + len;
    if (k < n) parts[k].rank_prev = (parts[k].rank_prev & ~kLow) | len;
    const uint32_t p = i - (a.rank_prev & kLow);  // valid when i > 0
    if (pairs != nullptr) {                       // both lookups' cache misses at once
      if (k < n) pairs->Prefetch(merged, id(parts[k].id_len));
      if (i > 0) pairs->Prefetch(id(parts[p].id_len), merged);
    }
    if (!rerank(i) || (i > 0 && !rerank(p))) return false;
  }
  for (uint32_t i = 0; i < n; i += parts[i].id_len & kLow) {
    emit(id(parts[i].id_len), i, i + (parts[i].id_len & kLow));
  }
  return true;
}

}  // namespace llm::tok::bpe_internal

namespace llm::tok {

template <typename Emit>
void BytePairEncode(const BpeModel& model, std::string_view piece, BpeScratch& scratch,
                    Emit&& emit) {
  if (piece.size() < kBpeHeapThreshold) {
    bpe_internal::ScanMerge(model, piece, emit);
  } else if (piece.size() < kBpeQueueThreshold) {
    bpe_internal::HeapMerge(model, piece, scratch, scratch.heap, emit);
  } else if (!bpe_internal::LongMerge(model, piece, scratch, emit)) {
    bpe_internal::HeapMerge(model, piece, scratch, scratch.queue, emit);
  }
}

}  // namespace llm::tok

#endif  // LLM_TOKENIZER_SVC_BPE_INL_H_
