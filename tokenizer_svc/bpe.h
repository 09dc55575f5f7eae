// The byte-pair merge loop for one pre-tokenized piece, exactly as tiktoken
// (and Hugging Face's BPE) define it: start from single bytes and repeatedly
// merge the adjacent pair of lowest rank, the leftmost one on ties, until no
// adjacent pair can merge.
//
// Two rank rules (vocab.h MergeRule):
//  - concatenation rank (tiktoken): a pair merges when the concatenation of its
//    bytes is a token; the rank is that token's id. The trie answers this by
//    walking from the left part's node along the right part's bytes.
//  - merge list (GGUF/HF): a pair merges when (left id, right id) is listed;
//    the rank is its position in the list.
//
// Cost: short pieces use tiktoken's scan (O(n^2) in the piece length, fastest
// for n < ~100) over fixed arrays on the stack; longer pieces use a priority
// queue (FlatHeap, or MergeQueue from kBpeQueueThreshold bytes) over a linked
// list of parts, O(n log n) at worst and O(n) for runs of a repeated letter,
// so 20,000 repeated letters take milliseconds, not seconds. From
// kBpeQueueThreshold bytes the parts are 8 bytes (LongPart) instead of 16: a
// megabyte-long piece is a merge sweep over the parts per distinct rank, and
// once they outgrow the core's L2 every sweep is a trip to L3, so bytes moved
// per byte of input, not instructions, set its cost there. All paths pick
// the same merge at every step, so their results are identical. Under the
// concatenation rule with a pair table, the initial ranks (pairs of single
// bytes) come from its direct byte-pair table, and the two re-ranks after
// each merge are prefetched together.
// Threads: a BpeScratch belongs to one thread; BpeModel is shared read-only.
#ifndef LLM_TOKENIZER_SVC_BPE_H_
#define LLM_TOKENIZER_SVC_BPE_H_

#include <array>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "tokenizer_svc/pair_table.h"
#include "tokenizer_svc/token_index.h"
#include "tokenizer_svc/trie.h"
#include "tokenizer_svc/vocab.h"

namespace llm::tok {

struct BpeModel {
  // Normal tokens' bytes -> id: the index when there is one, else the trie.
  const TokenIndex* tokens = nullptr;
  const Trie* trie = nullptr;
  // Concatenation rule: (left id, right id) -> merged id; nullptr or empty to
  // look pairs up in the trie instead (slower, same result).
  const PairTable* pairs = nullptr;
  // kMergeList only; nullptr selects the concatenation-rank rule.
  const absl::flat_hash_map<uint64_t, Merge>* merges = nullptr;
  // Token id of each single byte, Trie::kNoValue when the vocabulary lacks it.
  std::array<uint32_t, 256> byte_ids{};
};

// The heap path's priority queues of (rank, part index) pairs: both pop the
// smallest rank, and within it the smallest index; stale entries are the
// caller's to skip. Threads: one thread at a time. Memory: reused across
// Clear() calls.
//
// FlatHeap: one 4-ary min-heap of rank << 32 | index (half a binary heap's
// levels; a node's four children adjacent and compared without branches).
// Push and pop O(log n) in the number of entries; the lower constant for
// pieces of up to a few KB.
class FlatHeap {
 public:
  void Clear() { h_.clear(); }
  bool empty() const { return h_.empty(); }
  void Push(uint32_t rank, uint32_t index);
  // Requires !empty().
  std::pair<uint32_t, uint32_t> Pop();
  size_t ReservedBytes() const { return h_.capacity() * sizeof(uint64_t); }

 private:
  std::vector<uint64_t> h_;
};

// MergeQueue: for long pieces. A small binary heap holds
// the distinct ranks that have entries; each rank keeps its indices in a run
// that is sorted because they mostly arrive in increasing order (a merge
// sweep goes left to right), plus a binary heap for those that arrive out of
// order. Popping from the run is O(1), so a piece of n bytes with few
// distinct ranks (20,000 repeated letters) costs O(n) rather than a global
// heap's O(n log n); in general a push or pop is O(log of the number of
// distinct ranks or out-of-order entries), plus a hash lookup.
class MergeQueue {
 public:
  void Clear();
  bool empty() const { return ranks_.empty(); }
  void Push(uint32_t rank, uint32_t index);
  // Requires !empty(). Removes and returns the smallest (rank, index).
  std::pair<uint32_t, uint32_t> Pop();
  // Memory held (for a caller's cap on what it keeps); O(distinct ranks seen).
  size_t ReservedBytes() const;

 private:
  struct PerRank {
    std::vector<uint32_t> run;  // increasing; run[head..] are queued
    size_t head = 0;
    std::vector<uint32_t> overflow;  // min-heap of the others
  };
  // The PerRank of `rank`, created empty on first use.
  PerRank& Find(uint32_t rank);

  std::vector<uint32_t> ranks_;                      // min-heap of ranks with queued entries
  absl::flat_hash_map<uint32_t, uint32_t> slot_of_;  // rank -> index in per_rank_
  // Direct-mapped memo in front of slot_of_: [rank % 256] = (rank + 1) << 32
  // | slot, 0 if empty. A long piece has few hot ranks.
  std::array<uint64_t, 256> memo_{};
  std::vector<PerRank> per_rank_;  // [0, used_) belong to the current piece
  size_t used_ = 0;
};

// Per-thread working memory for long pieces (short ones use the stack),
// reused across pieces so the loop never allocates once it has warmed up.
struct BpeScratch {
  // Part i starts at byte i of the piece (parts are never moved, only
  // unlinked), so the start needs no field: 16 bytes a part.
  struct Part {
    uint32_t state;  // token id (Trie::kNoValue: a byte the vocabulary lacks)
    uint32_t rank;   // rank of merging with the next part; kNoRank if none
    uint32_t next;   // index (= start byte) of the next live part
    uint32_t prev;   // index of the previous live part
  };
  std::vector<Part> parts;
  // Long pieces' parts (kBpeQueueThreshold bytes or more), Part packed into
  // 8 bytes: the part starting at byte i is i..i+len, the previous live part
  // starts at i - prev_len; ids and ranks take 24 bits (kLongNone: none, or a
  // byte without a token), lengths 8. The constructor leaves the fields
  // uninitialized, so that resizing does not write the whole vector before the
  // merge loop does.
  struct LongPart {
    LongPart() {}        // NOLINT: deliberately no zeroing (see above)
    uint32_t id_len;     // token id << 8 | len
    uint32_t rank_prev;  // rank of merging with the next part << 8 | prev_len
  };
  std::vector<LongPart> long_parts;
  FlatHeap heap;     // pieces shorter than kBpeQueueThreshold
  MergeQueue queue;  // longer ones

  // Memory held; O(distinct ranks the queue has seen).
  size_t ReservedBytes() const {
    return parts.capacity() * sizeof(Part) + long_parts.capacity() * sizeof(LongPart) +
           heap.ReservedBytes() + queue.ReservedBytes();
  }
};

inline constexpr uint32_t kNoRank = UINT32_MAX;
// Pieces at least this long take the heap path.
inline constexpr size_t kBpeHeapThreshold = 128;
// Heap-path pieces at least this long use MergeQueue instead of FlatHeap:
// it is ~2x faster on 100 KB - 1 MB runs of one letter and grows linearly
// there, but its hash lookups cost ~10 % more on the few-hundred-byte pieces
// of ordinary text. Such pieces also use the 8-byte LongPart (where no part
// outgrows 255 bytes and all ids and ranks are below kLongNone; else the
// 16-byte Part).
inline constexpr size_t kBpeQueueThreshold = 4096;
// LongPart's 24-bit "no id" (Trie::kNoValue) and "no rank".
inline constexpr uint32_t kLongNone = 0xFFFFFF;

// Runs the merge loop on `piece` (non-empty) and calls
// emit(token_id, byte_begin, byte_end) for each resulting part, in order.
// token_id is Trie::kNoValue for a single byte that the vocabulary lacks.
template <typename Emit>
void BytePairEncode(const BpeModel& model, std::string_view piece, BpeScratch& scratch,
                    Emit&& emit);

}  // namespace llm::tok

#include "tokenizer_svc/bpe_inl.h"

#endif  // LLM_TOKENIZER_SVC_BPE_H_
