#include "tokenizer_svc/spm.h"

#include <algorithm>

namespace llm::tok {
namespace {

// Bytes of the UTF-8 character a lead byte starts, by its high nibble, as
// llama.cpp's unicode_len_utf8 counts them (continuation bytes count 1).
constexpr uint8_t kUtf8Length[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};

// Heap order: the highest score on top, then the leftmost pair.
bool Below(const SpmScratch::Bigram& a, const SpmScratch::Bigram& b) {
  return a.score < b.score || (a.score == b.score && a.left > b.left);
}

}  // namespace

void SpmEncode(const SpmModel& model, std::string_view text, SpmScratch& scratch,
               absl::FunctionRef<void(uint32_t id, uint32_t begin, uint32_t end)> emit) {
  if (text.empty()) return;
  auto& symbols = scratch.symbols;
  auto& heap = scratch.heap;
  symbols.clear();
  heap.clear();
  const Trie& trie = *model.trie;
  const auto* bytes = reinterpret_cast<const uint8_t*>(text.data());
  for (size_t offset = 0; offset < text.size();) {
    const size_t size = std::min<size_t>(kUtf8Length[bytes[offset] >> 4], text.size() - offset);
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back({static_cast<uint32_t>(offset), static_cast<uint32_t>(size), index - 1,
                       offset + size == text.size() ? -1 : index + 1,
                       trie.Walk(Trie::kRoot, text.substr(offset, size))});
    offset += size;
  }

  // Pushes the pair (left, right) when their concatenation is a token.
  auto try_pair = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const SpmScratch::Symbol& l = symbols[left];
    const SpmScratch::Symbol& r = symbols[right];
    if (l.node == Trie::kNoNode) return;
    const uint32_t node = trie.Walk(l.node, text.substr(r.begin, r.size));
    const uint32_t id = trie.Value(node);
    if (id == Trie::kNoValue) return;
    heap.push_back({model.scores[id], static_cast<uint32_t>(left), l.size + r.size, node});
    std::push_heap(heap.begin(), heap.end(), Below);
  };
  for (int32_t i = 1; i < static_cast<int32_t>(symbols.size()); ++i) try_pair(i - 1, i);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), Below);
    const SpmScratch::Bigram bigram = heap.back();
    heap.pop_back();
    SpmScratch::Symbol& left = symbols[bigram.left];
    if (left.size == 0 || left.next < 0) continue;
    SpmScratch::Symbol& right = symbols[left.next];
    // Stale: one side merged since (the left one is then empty or has another
    // right neighbour of another size; the right one grew).
    if (right.size == 0 || left.size + right.size != bigram.size) continue;
    left.size += right.size;
    left.node = bigram.node;
    right.size = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = static_cast<int32_t>(bigram.left);
    try_pair(left.prev, static_cast<int32_t>(bigram.left));
    try_pair(static_cast<int32_t>(bigram.left), left.next);
  }

  for (int32_t i = 0; i >= 0; i = symbols[i].next) {
    const SpmScratch::Symbol& s = symbols[i];
    emit(trie.Value(s.node), s.begin, s.begin + s.size);
  }
}

}  // namespace llm::tok
