#include "common/rendezvous.h"

#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace llm {
namespace {

TEST(RendezvousTest, ScoresAreFixed) {
  // Where sessions live depends on these values: they must never change.
  // Golden values (an independent Python implementation of the same hash).
  EXPECT_EQ(RendezvousScore("conversation-1", "model-0"), 0xe9d531bbc2f0182dull);
  EXPECT_EQ(RendezvousScore("", ""), 0x71b8262bb6e2e086ull);
  EXPECT_NE(RendezvousScore("a", "b"), RendezvousScore("b", "a"));
  EXPECT_NE(RendezvousScore("ab", ""), RendezvousScore("a", "b"));  // the separator counts
}

TEST(RendezvousTest, SameWinnerWhateverTheOrder) {
  const std::vector<std::string> forward = {"model-0", "model-1", "model-2"};
  const std::vector<std::string> backward = {"model-2", "model-1", "model-0"};
  for (int i = 0; i < 200; ++i) {
    const std::string key = "conversation-" + std::to_string(i);
    EXPECT_EQ(forward[RendezvousOrder(key, forward)[0]],
              backward[RendezvousOrder(key, backward)[0]]);
  }
}

TEST(RendezvousTest, OnlyTheLeavingNodesKeysMoveAndTheyGoToTheirSecondChoice) {
  const std::vector<std::string> all = {"a", "b", "c", "d"};
  const std::vector<std::string> without_b = {"a", "c", "d"};
  std::map<std::string, int> per_node;
  for (int i = 0; i < 1000; ++i) {
    const std::string key = std::to_string(i);
    const std::vector<size_t> order = RendezvousOrder(key, all);
    const std::string& after = without_b[RendezvousOrder(key, without_b)[0]];
    ++per_node[all[order[0]]];
    if (all[order[0]] != "b") {
      EXPECT_EQ(after, all[order[0]]) << key;
    } else {
      EXPECT_EQ(after, all[order[1]]) << key;
    }
  }
  for (const auto& [node, n] : per_node) EXPECT_GT(n, 180) << node;  // roughly even: 250 each
}

}  // namespace
}  // namespace llm
