#include "tokenizer_svc/token_index.h"

namespace llm::tok {

TokenIndex TokenIndex::Build(const std::vector<std::string>& token_bytes,
                             std::span<const uint32_t> ids, std::vector<uint32_t>* canonical) {
  if (canonical != nullptr) canonical->clear();
  size_t count = 0;
  for (const uint32_t id : ids) {
    const std::string& bytes = token_bytes[id];
    if (bytes.size() > kMaxTokenBytes) return TokenIndex();
    count += !bytes.empty();
  }
  TokenIndex t;
  size_t capacity = 16;
  int bits = 4;
  while (capacity < 2 * count) {
    capacity *= 2;
    ++bits;
  }
  t.slots_.resize(capacity);
  t.mask_ = capacity - 1;
  t.shift_ = 64 - bits;
  constexpr size_t kAhead = 8;  // prefetch distance, in ids
  for (size_t k = 0; k < ids.size(); ++k) {
    if (k + kAhead < ids.size()) {
      const std::string& ahead = token_bytes[ids[k + kAhead]];
      if (!ahead.empty()) __builtin_prefetch(&t.slots_[Hash(ahead) >> t.shift_]);
    }
    const uint32_t id = ids[k];
    const std::string& bytes = token_bytes[id];
    if (bytes.empty()) continue;
    size_t i = Hash(bytes) >> t.shift_;
    bool duplicate = false;  // a duplicate keeps the first id
    for (; t.slots_[i].id != Trie::kNoValue; i = (i + 1) & t.mask_) {
      const Slot& s = t.slots_[i];
      if (s.size == bytes.size() && t.SlotBytes(s) == bytes) {
        duplicate = true;
        break;
      }
    }
    if (duplicate) continue;
    Slot& s = t.slots_[i];
    s.id = id;
    s.size = static_cast<uint8_t>(bytes.size());
    if (bytes.size() <= kInlineBytes) {
      std::memcpy(s.bytes, bytes.data(), bytes.size());
    } else {
      const auto offset = static_cast<uint32_t>(t.arena_.size());
      t.arena_.append(bytes);
      std::memcpy(s.bytes, &offset, sizeof(offset));
    }
    ++t.size_;
    if (canonical != nullptr) canonical->push_back(id);
  }
  return t;
}

}  // namespace llm::tok
