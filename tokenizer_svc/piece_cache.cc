#include "tokenizer_svc/piece_cache.h"

#include <algorithm>
#include <utility>

namespace llm::tok {

PieceCache::PieceCache()
    : slots_(new Entry[kSlots]),
      wide_slots_(new WideEntry[kWideSlots]),
      long_slots_(new LongEntry[kLongSlots]) {
  std::memset(slots_.get(), 0, kSlots * sizeof(Entry));
  std::memset(wide_slots_.get(), 0, kWideSlots * sizeof(WideEntry));
}

void PieceCache::Reset(uint64_t owner) {
  if (owner == owner_) return;
  owner_ = owner;
  if (++generation_ == 0) {
    // 2^32 owner changes: clear for real rather than reuse generation 0.
    std::memset(slots_.get(), 0, kSlots * sizeof(Entry));
    std::memset(wide_slots_.get(), 0, kWideSlots * sizeof(WideEntry));
    for (size_t i = 0; i < kLongSlots; ++i) long_slots_[i].generation = 0;
    generation_ = 1;
  }
}

std::span<const uint32_t> PieceCache::LookupLong(std::string_view piece) const {
  if (piece.size() > kMaxLongPieceBytes) return {};
  const LongEntry* set = &long_slots_[SetOf(piece, kLongSlots)];
  for (int way = 0; way < 2; ++way) {
    if (set[way].generation == generation_ && set[way].long_generation == long_generation_ &&
        set[way].bytes == piece) {
      return set[way].ids;
    }
  }
  return {};
}

std::span<const uint32_t> PieceCache::LookupWide(std::string_view piece) const {
  const WideEntry* set = &wide_slots_[SetOf(piece, kWideSlots)];
  for (int way = 0; way < 2; ++way) {
    const WideEntry& e = set[way];
    if (e.generation == generation_ && e.size == piece.size() &&
        std::memcmp(e.bytes, piece.data(), piece.size()) == 0) {
      return {e.ids, e.num_ids};
    }
  }
  return {};
}

void PieceCache::Insert(std::string_view piece, std::span<const uint32_t> ids) {
  if (!Fits(piece, ids.size())) return;
  if (piece.size() > kMaxPieceBytes) {
    LongEntry* set = &long_slots_[SetOf(piece, kLongSlots)];
    std::swap(set[0], set[1]);  // way 0 becomes the older entry's storage
    LongEntry& e = set[0];
    e.generation = generation_;
    e.long_generation = long_generation_;
    e.bytes.assign(piece);
    e.ids.assign(ids.begin(), ids.end());
    return;
  }
  if (ids.size() > kMaxIds) {
    WideEntry* set = &wide_slots_[SetOf(piece, kWideSlots)];
    set[1] = set[0];
    WideEntry& e = set[0];
    e.generation = generation_;
    e.size = static_cast<uint8_t>(piece.size());
    e.num_ids = static_cast<uint8_t>(ids.size());
    std::memcpy(e.bytes, piece.data(), piece.size());
    std::copy(ids.begin(), ids.end(), e.ids);
    return;
  }
  Entry* set = &slots_[SetOf(piece, kSlots)];
  set[1] = set[0];
  Entry& e = set[0];
  e.generation = generation_;
  e.size = static_cast<uint8_t>(piece.size());
  e.num_ids = static_cast<uint8_t>(ids.size());
  std::memcpy(e.bytes, piece.data(), piece.size());
  std::copy(ids.begin(), ids.end(), e.ids);
}

PieceCache& ThreadPieceCache(uint64_t owner) {
  thread_local std::unique_ptr<PieceCache> cache;
  if (cache == nullptr) cache = std::make_unique<PieceCache>();
  cache->Reset(owner);
  return *cache;
}

}  // namespace llm::tok
