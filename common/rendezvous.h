// Rendezvous (highest-random-weight) hashing: which of a set of nodes a key
// belongs to, the same answer from every process whatever order or subset
// of the nodes it was given, and when a node leaves only its keys move (each
// to its next node in the key's order).
//
// The project names model replicas by their pod (ModelInfo.replica_id up to
// its last '.': stable across restarts), and keys are session names: every
// gateway and every draining replica picks a named session's replica this
// way (docs/client.md, "Named sessions").
//
// The hash is FNV-1a 64 of the key, a zero byte and the node, finished by
// SplitMix64's mixer: fixed forever (it decides where sessions live, across
// processes and versions), not absl::Hash (which may change per process).
// Threads: pure functions. Cost: O(len(key) + len(node)) a score; an order is
// n scores and a sort.
#ifndef LLM_COMMON_RENDEZVOUS_H_
#define LLM_COMMON_RENDEZVOUS_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <string_view>
#include <vector>

namespace llm {

// The weight of `node` for `key`: higher wins.
inline uint64_t RendezvousScore(std::string_view key, std::string_view node) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a offset basis
  auto mix = [&h](unsigned char c) {
    h ^= c;
    h *= 0x100000001b3ull;  // FNV prime
  };
  for (unsigned char c : key) mix(c);
  mix(0);
  for (unsigned char c : node) mix(c);
  h += 0x9e3779b97f4a7c15ull;  // SplitMix64's finalizer
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
  h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

// The indices of `nodes` from `key`'s first choice to its last (ties, only
// between equal node names, by index).
template <typename Nodes>
std::vector<size_t> RendezvousOrder(std::string_view key, const Nodes& nodes) {
  std::vector<uint64_t> score;
  score.reserve(std::size(nodes));
  for (const auto& node : nodes) score.push_back(RendezvousScore(key, node));
  std::vector<size_t> order(score.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&score](size_t a, size_t b) { return score[a] > score[b]; });
  return order;
}

}  // namespace llm

#endif  // LLM_COMMON_RENDEZVOUS_H_
