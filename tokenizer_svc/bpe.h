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
// for n < ~100) over fixed arrays on the stack; longer pieces use a binary
// heap over a linked list of parts, O(n log n), so 20,000 repeated letters
// take milliseconds, not seconds. Both pick the same merge at every step, so
// their results are identical. Under the concatenation rule with a pair
// table, the initial ranks (pairs of single bytes) come from its direct byte-
// pair table, and the two re-ranks after each merge are prefetched together.
// Threads: a BpeScratch belongs to one thread; BpeModel is shared read-only.
#ifndef LLM_TOKENIZER_SVC_BPE_H_
#define LLM_TOKENIZER_SVC_BPE_H_

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "tokenizer_svc/pair_table.h"
#include "tokenizer_svc/trie.h"
#include "tokenizer_svc/vocab.h"

namespace llm::tok {

struct BpeModel {
  const Trie* trie = nullptr;  // normal tokens' bytes -> id
  // Concatenation rule: (left id, right id) -> merged id; nullptr or empty to
  // look pairs up in the trie instead (slower, same result).
  const PairTable* pairs = nullptr;
  // kMergeList only; nullptr selects the concatenation-rank rule.
  const absl::flat_hash_map<uint64_t, Merge>* merges = nullptr;
  // Token id of each single byte, Trie::kNoValue when the vocabulary lacks it.
  std::array<uint32_t, 256> byte_ids{};
};

// Per-thread working memory for long pieces (short ones use the stack),
// reused across pieces so the loop never allocates once it has warmed up.
struct BpeScratch {
  struct Part {
    uint32_t start;  // byte offset in the piece
    uint32_t state;  // token id (Trie::kNoValue: a byte the vocabulary lacks)
    uint32_t rank;   // rank of merging with the next part; kNoRank if none
    uint32_t next;   // heap path: index of the next live part
    uint32_t prev;   // heap path: index of the previous live part
  };
  std::vector<Part> parts;
  std::vector<uint64_t> heap;
};

inline constexpr uint32_t kNoRank = UINT32_MAX;
// Pieces at least this long take the heap path.
inline constexpr size_t kBpeHeapThreshold = 128;

// Runs the merge loop on `piece` (non-empty) and calls
// emit(token_id, byte_begin, byte_end) for each resulting part, in order.
// token_id is Trie::kNoValue for a single byte that the vocabulary lacks.
template <typename Emit>
void BytePairEncode(const BpeModel& model, std::string_view piece, BpeScratch& scratch,
                    Emit&& emit);

}  // namespace llm::tok

#include "tokenizer_svc/bpe_inl.h"

#endif  // LLM_TOKENIZER_SVC_BPE_H_
