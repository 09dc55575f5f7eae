// PieceCache: a bounded cache of pre-tokenized piece -> token ids, so that a
// piece seen recently (" the", "ing", "    ") skips the BPE merge loop. Hugging
// Face's tokenizers keep a similar cache; tiktoken does not.
//
// Layout: three 2-way set-associative tables. Short pieces (at most
// kMaxPieceBytes bytes) with at most kMaxIds ids live in kSlots fixed 64-byte
// entries (one cache line each), those with up to kMaxWideIds ids (runs of
// CJK, emoji, combining marks: two or three ids per character) in kWideSlots
// fixed 128-byte entries, looked at after a miss in the first table; longer
// pieces, up to kMaxLongPieceBytes, in kLongSlots entries that own their bytes
// and ids (heap memory, reused by the next occupant). Longer pieces are never
// cached. The tokenizer calls
// ForgetLong() at the start of every Encode, so long entries serve repeats
// within one call only: kept across calls they made a call's time depend on
// what the thread encoded before (a 100 KB text encoded again hit on all its
// long pieces, a 1 MB one did not fit, and the worst-case scaling measure of
// bench/README.md read 20 instead of 10). A set holds the two pieces
// inserted last into it; a lookup compares sizes and bytes, so a hash
// collision is only ever a miss. Correctness does not depend on what is
// cached: an entry holds exactly what the merge loop produced for those bytes
// under one owner (a tokenizer instance); Reset() for another owner
// invalidates every entry in O(1).
// Memory: kSlots * 64 + kWideSlots * 128 bytes = 768 KiB, plus at most
// kLongSlots * 5 * kMaxLongPieceBytes = 640 KiB for long entries (only as
// long pieces occur).
// Threads: not thread-safe. ThreadPieceCache() gives each thread its own
// cache (created on the thread's first call, freed at thread exit), so
// concurrent Encode calls on any number of threads never share one.
// Cost: Lookup and Insert hash the piece once (a few ns for short pieces) and
// touch one set (two cache lines; a short piece's miss, two sets).
#ifndef LLM_TOKENIZER_SVC_PIECE_CACHE_H_
#define LLM_TOKENIZER_SVC_PIECE_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer_svc/hash_bytes.h"

namespace llm::tok {

class PieceCache {
 public:
  static constexpr size_t kSlots = 8192;  // 2 per set
  static constexpr size_t kMaxPieceBytes = 26;
  static constexpr size_t kMaxIds = 8;
  static constexpr size_t kWideSlots = 2048;  // 2 per set
  static constexpr size_t kMaxWideIds = 24;
  static constexpr size_t kLongSlots = 512;  // 2 per set
  static constexpr size_t kMaxLongPieceBytes = 256;

  PieceCache();

  // Forgets every entry unless the cache already belongs to `owner`; owners
  // are never 0.
  void Reset(uint64_t owner);
  uint64_t owner() const { return owner_; }
  // Forgets the long entries only, in O(1).
  void ForgetLong() {
    if (++long_generation_ == 0) long_generation_ = 1;
  }

  // The ids cached for `piece`, or an empty span on a miss. Valid until the
  // next Insert or Reset.
  std::span<const uint32_t> Lookup(std::string_view piece) const {
    if (piece.size() > kMaxPieceBytes) return LookupLong(piece);
    const Entry* set = &slots_[SetOf(piece, kSlots)];
    for (int way = 0; way < 2; ++way) {
      const Entry& e = set[way];
      if (e.generation == generation_ && e.size == piece.size() &&
          std::memcmp(e.bytes, piece.data(), piece.size()) == 0) {
        return {e.ids, e.num_ids};
      }
    }
    return LookupWide(piece);
  }

  // Caches `ids` (non-empty) for `piece`, evicting the older entry of its
  // set; does nothing when either is too long to fit.
  void Insert(std::string_view piece, std::span<const uint32_t> ids);

  // Whether Insert(piece, ids) would store anything.
  static bool Fits(std::string_view piece, size_t num_ids) {
    if (num_ids == 0) return false;
    if (piece.size() <= kMaxPieceBytes) return num_ids <= kMaxWideIds;
    return piece.size() <= kMaxLongPieceBytes && num_ids <= piece.size();
  }

 private:
  struct alignas(64) Entry {
    uint32_t generation;  // valid only when equal to generation_
    uint8_t size;
    uint8_t num_ids;
    char bytes[kMaxPieceBytes];
    uint32_t ids[kMaxIds];
  };
  static_assert(sizeof(Entry) == 64);
  struct alignas(64) WideEntry {
    uint32_t generation;
    uint8_t size;
    uint8_t num_ids;
    char bytes[kMaxPieceBytes];
    uint32_t ids[kMaxWideIds];
  };
  static_assert(sizeof(WideEntry) == 128);
  struct LongEntry {
    uint32_t generation = 0;
    uint32_t long_generation = 0;
    std::string bytes;
    std::vector<uint32_t> ids;
  };

  std::span<const uint32_t> LookupLong(std::string_view piece) const;
  std::span<const uint32_t> LookupWide(std::string_view piece) const;

  // Index of the first slot of `piece`'s set in a table of `slots` slots.
  static size_t SetOf(std::string_view piece, size_t slots) {
    return static_cast<size_t>(HashBytes(piece) >> 40) & (slots - 2);
  }

  std::unique_ptr<Entry[]> slots_;
  std::unique_ptr<WideEntry[]> wide_slots_;
  std::unique_ptr<LongEntry[]> long_slots_;
  uint32_t generation_ = 1;  // entries start at 0: all invalid
  uint32_t long_generation_ = 1;
  uint64_t owner_ = 0;
};

// The calling thread's cache, Reset() for `owner` (a tokenizer's unique id).
PieceCache& ThreadPieceCache(uint64_t owner);

}  // namespace llm::tok

#endif  // LLM_TOKENIZER_SVC_PIECE_CACHE_H_
