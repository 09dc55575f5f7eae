#include "tokenizer_svc/token_index.h"

namespace llm::tok {

TokenIndex TokenIndex::Build(const Trie& trie, const std::vector<std::string>& token_bytes) {
  std::vector<uint32_t> ids;
  for (size_t id = 0; id < token_bytes.size(); ++id) {
    const std::string& bytes = token_bytes[id];
    if (bytes.empty() || trie.Find(bytes) != id) continue;  // not normal, or a duplicate
    if (bytes.size() > kMaxTokenBytes) return TokenIndex();
    ids.push_back(static_cast<uint32_t>(id));
  }
  TokenIndex t;
  size_t capacity = 16;
  int bits = 4;
  while (capacity < 2 * ids.size()) {
    capacity *= 2;
    ++bits;
  }
  t.slots_.resize(capacity);
  t.mask_ = capacity - 1;
  t.shift_ = 64 - bits;
  for (const uint32_t id : ids) {
    const std::string& bytes = token_bytes[id];
    size_t i = Hash(bytes) >> t.shift_;
    while (t.slots_[i].id != Trie::kNoValue) i = (i + 1) & t.mask_;
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
  }
  return t;
}

}  // namespace llm::tok
