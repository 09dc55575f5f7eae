// Prefix tree over byte strings, each key carrying a 32-bit value (a token id).
//
// This is the seed's prefix tree: the vocabulary's token byte strings are its
// keys. It answers exact lookups (is this piece a token?), step-by-step walks
// (the BPE merge loop extends a part's node by its right neighbour's bytes to
// find the merged token), and longest-prefix matches (special tokens, and the
// greedy longest-match mode).
//
// Layout: after Freeze(), nodes are stored breadth-first with their outgoing
// edges in one sorted array (labels and targets apart, for cache density); the
// root's 256 children are a direct table.
// Threads: build single-threaded; after Freeze() the trie is immutable and safe
// to read concurrently. Cost: Child() is O(1) at the root and O(log degree)
// elsewhere; memory is about 13 bytes per node.
#ifndef LLM_TOKENIZER_SVC_TRIE_H_
#define LLM_TOKENIZER_SVC_TRIE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

namespace llm::tok {

class Trie {
 public:
  static constexpr uint32_t kRoot = 0;
  static constexpr uint32_t kNoNode = UINT32_MAX;
  static constexpr uint32_t kNoValue = UINT32_MAX;

  Trie();

  // Adds `key` with `value` (value != kNoValue). Returns false, leaving the
  // first value in place, when the key is already present. Empty keys are
  // rejected (returns false). Only valid before Freeze().
  bool Insert(std::string_view key, uint32_t value);

  // Compacts the tree for lookups. Insert() is not allowed afterwards.
  void Freeze();

  // Child of `node` along `byte`, or kNoNode.
  uint32_t Child(uint32_t node, uint8_t byte) const {
    if (node == kRoot) return root_[byte];
    const Node& n = nodes_[node];
    const uint8_t* first = labels_.data() + n.first_edge;
    const uint8_t* last = first + n.num_edges;
    if (n.num_edges <= 8) {
      for (const uint8_t* p = first; p != last; ++p) {
        if (*p == byte) return targets_[p - labels_.data()];
      }
      return kNoNode;
    }
    return ChildSearch(first, last, byte);
  }

  // Node reached from `node` by `bytes`, or kNoNode.
  uint32_t Walk(uint32_t node, std::string_view bytes) const {
    for (char c : bytes) {
      if (node == kNoNode) return kNoNode;
      node = Child(node, static_cast<uint8_t>(c));
    }
    return node;
  }

  // Value stored at `node` (kNoValue for none, or for kNoNode).
  uint32_t Value(uint32_t node) const {
    return node == kNoNode ? kNoValue : nodes_[node].value;
  }

  // Value of `key`, or kNoValue.
  uint32_t Find(std::string_view key) const { return Value(Walk(kRoot, key)); }

  // The longest key that is a prefix of `text`: {length, value}, or {0, kNoValue}.
  std::pair<size_t, uint32_t> LongestPrefix(std::string_view text) const;

  size_t num_nodes() const { return nodes_.size(); }
  size_t num_keys() const { return num_keys_; }
  bool frozen() const { return frozen_; }
  // Bytes a key may start with (useful to skip text quickly).
  bool IsFirstByte(uint8_t b) const { return root_[b] != kNoNode; }

 private:
  struct Node {
    uint32_t first_edge = 0;
    uint16_t num_edges = 0;
    uint32_t value = kNoValue;
  };

  uint32_t ChildSearch(const uint8_t* first, const uint8_t* last, uint8_t byte) const;

  std::vector<Node> nodes_;
  std::vector<uint8_t> labels_;
  std::vector<uint32_t> targets_;
  std::array<uint32_t, 256> root_;
  // Build-time edges, one list per node: (label, child).
  std::vector<std::vector<std::pair<uint8_t, uint32_t>>> build_edges_;
  size_t num_keys_ = 0;
  bool frozen_ = false;
};

}  // namespace llm::tok

#endif  // LLM_TOKENIZER_SVC_TRIE_H_
