#include "tokenizer_svc/trie.h"

#include <algorithm>

namespace llm::tok {

Trie::Trie() : nodes_(1), build_edges_(1) { root_.fill(kNoNode); }

bool Trie::Insert(std::string_view key, uint32_t value) {
  if (frozen_ || key.empty() || value == kNoValue) return false;
  uint32_t node = kRoot;
  for (char c : key) {
    const auto byte = static_cast<uint8_t>(c);
    uint32_t next = kNoNode;
    if (node == kRoot) {
      next = root_[byte];
    } else {
      for (const auto& [label, child] : build_edges_[node]) {
        if (label == byte) {
          next = child;
          break;
        }
      }
    }
    if (next == kNoNode) {
      next = static_cast<uint32_t>(nodes_.size());
      nodes_.emplace_back();
      build_edges_.emplace_back();
      if (node == kRoot) {
        root_[byte] = next;
      }
      build_edges_[node].emplace_back(byte, next);
    }
    node = next;
  }
  if (nodes_[node].value != kNoValue) return false;
  nodes_[node].value = value;
  ++num_keys_;
  return true;
}

void Trie::Freeze() {
  if (frozen_) return;
  // Renumber nodes breadth-first so that siblings' subtrees sit close together.
  const size_t n = nodes_.size();
  std::vector<uint32_t> order;
  order.reserve(n);
  std::vector<uint32_t> new_id(n, kNoNode);
  order.push_back(kRoot);
  new_id[kRoot] = kRoot;
  for (size_t i = 0; i < order.size(); ++i) {
    auto& edges = build_edges_[order[i]];
    std::sort(edges.begin(), edges.end());
    for (const auto& [label, child] : edges) {
      new_id[child] = static_cast<uint32_t>(order.size());
      order.push_back(child);
    }
  }
  std::vector<Node> nodes(n);
  labels_.clear();
  targets_.clear();
  labels_.reserve(n);
  targets_.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t old = order[i];
    Node& node = nodes[i];
    node.value = nodes_[old].value;
    node.first_edge = static_cast<uint32_t>(labels_.size());
    node.num_edges = static_cast<uint16_t>(build_edges_[old].size());
    for (const auto& [label, child] : build_edges_[old]) {
      labels_.push_back(label);
      targets_.push_back(new_id[child]);
    }
    if (i != kRoot && node.num_edges > kDenseDegree) {
      node.dense = static_cast<uint32_t>(dense_.size() / 256);
      dense_.resize(dense_.size() + 256, kNoNode);
      for (const auto& [label, child] : build_edges_[old]) {
        dense_[static_cast<size_t>(node.dense) * 256 + label] = new_id[child];
      }
    }
  }
  for (auto& r : root_) {
    if (r != kNoNode) r = new_id[r];
  }
  nodes_ = std::move(nodes);
  build_edges_.clear();
  build_edges_.shrink_to_fit();
  frozen_ = true;
}

std::pair<size_t, uint32_t> Trie::LongestPrefix(std::string_view text) const {
  std::pair<size_t, uint32_t> best{0, kNoValue};
  uint32_t node = kRoot;
  for (size_t i = 0; i < text.size(); ++i) {
    node = Child(node, static_cast<uint8_t>(text[i]));
    if (node == kNoNode) break;
    if (nodes_[node].value != kNoValue) best = {i + 1, nodes_[node].value};
  }
  return best;
}

}  // namespace llm::tok
