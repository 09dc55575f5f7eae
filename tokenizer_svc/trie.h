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
// root's 256 children, and those of every node with more than 24 children,
// are direct tables.
// Threads: build single-threaded; after Freeze() the trie is immutable and safe
// to read concurrently. Cost: Child() is O(1) at the root and at high-degree
// nodes, a scan of at most 24 sorted labels elsewhere; memory is about 21
// bytes per node plus 1 KiB per high-degree node.
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
    if (n.dense != kNoDense) return dense_[static_cast<size_t>(n.dense) * 256 + byte];
    const uint8_t* first = labels_.data() + n.first_edge;
    const uint8_t* last = first + n.num_edges;
    for (const uint8_t* p = first; p != last; ++p) {
      if (*p == byte) return targets_[p - labels_.data()];
    }
    return kNoNode;
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
  uint32_t Value(uint32_t node) const { return node == kNoNode ? kNoValue : nodes_[node].value; }

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
  static constexpr uint32_t kNoDense = UINT32_MAX;
  // Nodes with more children than this get a direct 256-entry child table.
  static constexpr uint16_t kDenseDegree = 24;

  struct Node {
    uint32_t first_edge = 0;
    uint32_t value = kNoValue;
    uint32_t dense = kNoDense;  // index of the node's table in dense_, if any
    uint16_t num_edges = 0;
  };

  std::vector<Node> nodes_;
  std::vector<uint8_t> labels_;
  std::vector<uint32_t> targets_;
  std::array<uint32_t, 256> root_;
  std::vector<uint32_t> dense_;  // 256 children per high-degree node
  // Build-time edges, one list per node: (label, child).
  std::vector<std::vector<std::pair<uint8_t, uint32_t>>> build_edges_;
  size_t num_keys_ = 0;
  bool frozen_ = false;
};

}  // namespace llm::tok

#endif  // LLM_TOKENIZER_SVC_TRIE_H_
