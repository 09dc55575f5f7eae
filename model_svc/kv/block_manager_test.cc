#include "model_svc/kv/block_manager.h"

#include <memory>
#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace llm::kv {
namespace {

// Appends n tokens the way the engine does: reserve, then count them.
void Append(BlockManager& m, BlockTable& t, int64_t n, std::vector<BlockCopy>* copies) {
  ASSERT_TRUE(m.Reserve(t, n, copies).ok());
  t.num_tokens += n;
}

TEST(BlockManagerTest, ReserveAllocatesWholeBlocks) {
  BlockManager m(8, 4);
  BlockTable t;
  std::vector<BlockCopy> copies;
  EXPECT_EQ(m.BlocksNeeded(t, 5), 2);
  Append(m, t, 5, &copies);
  EXPECT_EQ(t.blocks.size(), 2u);
  EXPECT_EQ(m.num_free(), 6);
  EXPECT_EQ(m.BlocksNeeded(t, 3), 0);
  Append(m, t, 3, &copies);
  EXPECT_EQ(t.blocks.size(), 2u);
  Append(m, t, 1, &copies);
  EXPECT_EQ(t.blocks.size(), 3u);
  EXPECT_TRUE(copies.empty());
  std::set<int32_t> distinct(t.blocks.begin(), t.blocks.end());
  EXPECT_EQ(distinct.size(), 3u);
}

TEST(BlockManagerTest, ExhaustionChangesNothing) {
  BlockManager m(2, 4);
  BlockTable t;
  std::vector<BlockCopy> copies;
  Append(m, t, 6, &copies);
  absl::Status s = m.Reserve(t, 3, &copies);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(s.message()), testing::HasSubstr("KV cache full"));
  EXPECT_EQ(t.blocks.size(), 2u);
  EXPECT_EQ(m.num_free(), 0);
  EXPECT_TRUE(m.Reserve(t, 2, &copies).ok());  // still fits in the second block
}

TEST(BlockManagerTest, ReleaseAndTruncateFreeEverything) {
  BlockManager m(8, 4);
  BlockTable t;
  std::vector<BlockCopy> copies;
  Append(m, t, 13, &copies);
  EXPECT_EQ(m.num_free(), 4);
  m.Truncate(t, 5);
  EXPECT_EQ(t.num_tokens, 5);
  EXPECT_EQ(t.blocks.size(), 2u);
  EXPECT_EQ(m.num_free(), 6);
  m.Truncate(t, 0);
  EXPECT_TRUE(t.blocks.empty());
  EXPECT_EQ(m.num_free(), 8);
  Append(m, t, 9, &copies);
  m.Release(t);
  EXPECT_EQ(m.num_free(), 8);
  EXPECT_EQ(t.num_tokens, 0);
}

TEST(BlockManagerTest, TruncateToTheLengthDropsBlocksReservedButNotComputed) {
  BlockManager m(8, 4);
  BlockTable t;
  std::vector<BlockCopy> copies;
  Append(m, t, 3, &copies);
  ASSERT_TRUE(m.Reserve(t, 6, &copies).ok());  // a cancelled request's blocks
  EXPECT_EQ(t.blocks.size(), 3u);
  m.Truncate(t, t.num_tokens);
  EXPECT_EQ(t.blocks.size(), 1u);
  EXPECT_EQ(t.num_tokens, 3);
  EXPECT_EQ(m.num_free(), 7);
}

TEST(BlockManagerTest, ForkSharesAndCopiesOnWrite) {
  BlockManager m(16, 4);
  BlockTable parent, child;
  std::vector<BlockCopy> copies;
  Append(m, parent, 6, &copies);  // blocks: [full, half]
  m.Fork(parent, child);
  EXPECT_EQ(child.blocks, parent.blocks);
  EXPECT_EQ(child.num_tokens, 6);
  EXPECT_EQ(m.ref_count(parent.blocks[0]), 2);
  EXPECT_EQ(m.num_free(), 14);

  // The child writes position 6: the shared half block is copied; the full
  // block stays shared.
  EXPECT_EQ(m.BlocksNeeded(child, 1), 1);
  Append(m, child, 1, &copies);
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0].src, parent.blocks[1]);
  EXPECT_EQ(copies[0].dst, child.blocks[1]);
  EXPECT_NE(child.blocks[1], parent.blocks[1]);
  EXPECT_EQ(child.blocks[0], parent.blocks[0]);
  EXPECT_EQ(m.ref_count(parent.blocks[1]), 1);

  // The parent writes into its own (now private) half block: no copy.
  copies.clear();
  Append(m, parent, 2, &copies);
  EXPECT_TRUE(copies.empty());

  m.Release(parent);
  EXPECT_EQ(m.ref_count(child.blocks[0]), 1);
  m.Release(child);
  EXPECT_EQ(m.num_free(), 16);
}

TEST(BlockManagerTest, TruncateIntoSharedBlockCopiesOnNextWrite) {
  BlockManager m(16, 4);
  BlockTable parent, child;
  std::vector<BlockCopy> copies;
  Append(m, parent, 8, &copies);
  m.Fork(parent, child);
  m.Truncate(child, 2);  // child keeps block 0, shared
  EXPECT_EQ(child.blocks.size(), 1u);
  Append(m, child, 3, &copies);  // rewrites positions 2..4
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0].src, parent.blocks[0]);
  EXPECT_NE(child.blocks[0], parent.blocks[0]);
  m.Release(child);
  m.Release(parent);
  EXPECT_EQ(m.num_free(), 16);
}

TEST(BlockManagerTest, ForkDoesNotShareReservedButUnusedBlocks) {
  BlockManager m(16, 4);
  BlockTable parent, child;
  std::vector<BlockCopy> copies;
  Append(m, parent, 4, &copies);
  ASSERT_TRUE(m.Reserve(parent, 8, &copies).ok());  // a cancelled request's reservation
  EXPECT_EQ(parent.blocks.size(), 3u);
  m.Fork(parent, child);
  EXPECT_EQ(child.blocks.size(), 1u);
  EXPECT_EQ(m.ref_count(parent.blocks[1]), 1);
  m.Release(parent);
  m.Release(child);
  EXPECT_EQ(m.num_free(), 16);
}

TEST(BlockLeaseTest, DestructorReleasesEveryBlock) {
  BlockManager m(16, 4);
  std::vector<BlockCopy> copies;
  {
    BlockLease lease(&m);
    ASSERT_TRUE(lease.Reserve(9, &copies).ok());
    lease.Commit(9);
    EXPECT_EQ(lease.num_tokens(), 9);
    EXPECT_EQ(lease.blocks().size(), 3u);
    EXPECT_EQ(m.num_free(), 13);
  }
  EXPECT_EQ(m.num_free(), 16);
}

TEST(BlockLeaseTest, MoveTransfersAndAssignmentReleasesTheOld) {
  BlockManager m(16, 4);
  std::vector<BlockCopy> copies;
  BlockLease a(&m);
  ASSERT_TRUE(a.Reserve(4, &copies).ok());
  a.Commit(4);
  BlockLease b(std::move(a));
  EXPECT_EQ(b.blocks().size(), 1u);
  EXPECT_EQ(m.num_free(), 15);
  BlockLease c(&m);
  ASSERT_TRUE(c.Reserve(8, &copies).ok());
  EXPECT_EQ(m.num_free(), 13);
  c = std::move(b);  // c's two blocks go back; b's one is c's now
  EXPECT_EQ(m.num_free(), 15);
  EXPECT_EQ(c.num_tokens(), 4);
  c = BlockLease();
  EXPECT_EQ(m.num_free(), 16);
}

TEST(BlockLeaseTest, ForkSharesUntilBothAreGone) {
  BlockManager m(16, 4);
  std::vector<BlockCopy> copies;
  auto parent = std::make_unique<BlockLease>(&m);
  ASSERT_TRUE(parent->Reserve(6, &copies).ok());
  parent->Commit(6);
  BlockLease child = parent->Fork();
  EXPECT_EQ(child.blocks(), parent->blocks());
  EXPECT_EQ(m.ref_count(child.blocks()[0]), 2);
  parent.reset();
  EXPECT_EQ(m.ref_count(child.blocks()[0]), 1);
  EXPECT_EQ(m.num_free(), 14);
  child.Truncate(0);
  EXPECT_EQ(m.num_free(), 16);
}

}  // namespace
}  // namespace llm::kv
