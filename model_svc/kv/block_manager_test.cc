#include "model_svc/kv/block_manager.h"

#include <memory>
#include <set>
#include <vector>

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
    lease.Commit(9, std::vector<int32_t>(9, 1));
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
  a.Commit(4, std::vector<int32_t>(4, 1));
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
  parent->Commit(6, std::vector<int32_t>(6, 1));
  BlockLease child = parent->Fork();
  EXPECT_EQ(child.blocks(), parent->blocks());
  EXPECT_EQ(m.ref_count(child.blocks()[0]), 2);
  parent.reset();
  EXPECT_EQ(m.ref_count(child.blocks()[0]), 1);
  EXPECT_EQ(m.num_free(), 14);
  child.Truncate(0);
  EXPECT_EQ(m.num_free(), 16);
}

// The prefix cache, with blocks of 4 positions.
class PrefixCacheTest : public ::testing::Test {
 protected:
  PrefixCacheTest() : m_(8, 4) { m_.EnablePrefixCache(42); }

  // Appends `tokens` to the sequence (tokens_ holds its tokens).
  void Append(BlockTable& t, std::vector<int32_t>& seq, const std::vector<int32_t>& tokens) {
    std::vector<BlockCopy> copies;
    ASSERT_TRUE(m_.Reserve(t, static_cast<int64_t>(tokens.size()), &copies).ok());
    copies_.insert(copies_.end(), copies.begin(), copies.end());
    seq.insert(seq.end(), tokens.begin(), tokens.end());
    m_.Commit(t, static_cast<int64_t>(tokens.size()), seq);
  }
  int64_t Reuse(BlockTable& t, const std::vector<int32_t>& tokens) {
    return m_.Reuse(t, tokens.data(), static_cast<int64_t>(tokens.size()));
  }

  BlockManager m_;
  std::vector<BlockCopy> copies_;
};

const std::vector<int32_t> kTen = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};

TEST_F(PrefixCacheTest, ReleasedFullBlocksAreReusedAndTheLastTokenIsLeftToCompute) {
  BlockTable a;
  std::vector<int32_t> sa;
  Append(a, sa, kTen);
  EXPECT_EQ(a.hashes.size(), 2u);  // positions 0-7; 8-9 are a partial block
  const std::vector<int32_t> full = a.blocks;
  m_.Release(a);
  EXPECT_EQ(m_.num_free(), 8);
  EXPECT_EQ(m_.num_cached(), 2);

  BlockTable b;
  EXPECT_EQ(Reuse(b, kTen), 8);
  EXPECT_EQ(b.num_tokens, 8);
  EXPECT_EQ(b.blocks, std::vector<int32_t>(full.begin(), full.begin() + 2));
  EXPECT_EQ(m_.num_cached(), 0);
  EXPECT_EQ(m_.ref_count(b.blocks[0]), 1);

  // Eight tokens: the second block would hold the last one, which must be
  // computed for its logits; only the first is reused.
  BlockTable c;
  EXPECT_EQ(Reuse(c, std::vector<int32_t>(kTen.begin(), kTen.begin() + 8)), 4);
  EXPECT_EQ(m_.ref_count(c.blocks[0]), 2);
}

TEST_F(PrefixCacheTest, ADifferentTokenOrParentEndsTheMatch) {
  BlockTable a;
  std::vector<int32_t> sa;
  Append(a, sa, kTen);
  std::vector<int32_t> other = kTen;
  other[5] = 99;  // in the second block
  BlockTable b;
  EXPECT_EQ(Reuse(b, other), 4);
  // The same tokens in the second block after a different first block: the
  // chain differs.
  std::vector<int32_t> shifted = kTen;
  shifted[0] = 77;
  BlockTable c;
  EXPECT_EQ(Reuse(c, shifted), 0);
  EXPECT_TRUE(c.blocks.empty());
}

TEST_F(PrefixCacheTest, ReuseExtendsAFullTableOnly) {
  BlockTable a;
  std::vector<int32_t> sa;
  Append(a, sa, kTen);
  m_.Release(a);
  BlockTable b;
  std::vector<int32_t> sb;
  Append(b, sb, {1, 2, 3, 4});
  // b ends on a block boundary: the next block of the chain is found.
  EXPECT_EQ(Reuse(b, {5, 6, 7, 8, 9}), 4);
  EXPECT_EQ(b.num_tokens, 8);
  BlockTable c;
  std::vector<int32_t> sc;
  Append(c, sc, {1, 2});  // a partial block: nothing is reused
  EXPECT_EQ(Reuse(c, {3, 4, 5, 6, 7, 8, 9}), 0);
}

TEST_F(PrefixCacheTest, EvictionTakesUnnamedBlocksFirstThenTheOldestChainsEnd) {
  BlockTable a;
  std::vector<int32_t> sa;
  Append(a, sa, {1, 2, 3, 4, 5, 6, 7, 8});  // two named blocks
  const std::vector<int32_t> named = a.blocks;
  m_.Release(a);
  EXPECT_EQ(m_.num_cached(), 2);
  BlockTable b;
  std::vector<int32_t> sb;
  Append(b, sb, std::vector<int32_t>(24, 5));  // six blocks: every unnamed one
  EXPECT_EQ(m_.num_cached(), 2);
  Append(b, sb, {5, 5, 5, 5});  // one more: the chain's last block goes
  EXPECT_EQ(m_.num_cached(), 1);
  EXPECT_EQ(b.blocks.back(), named[1]);
  BlockTable c;
  EXPECT_EQ(Reuse(c, {1, 2, 3, 4, 5, 6, 7, 8, 9}), 4);  // the first block is still cached
  EXPECT_EQ(c.blocks[0], named[0]);
}

TEST_F(PrefixCacheTest, TruncatingIntoANamedBlockUnnamesItUnlessShared) {
  BlockTable a;
  std::vector<int32_t> sa;
  Append(a, sa, {1, 2, 3, 4, 5, 6, 7, 8});
  m_.Truncate(a, 6);
  sa.resize(6);
  EXPECT_EQ(a.hashes.size(), 1u);
  Append(a, sa, {60, 70});  // overwrites positions 6-7 in place (not shared)
  EXPECT_TRUE(copies_.empty());
  BlockTable b;
  // The old second block's name is gone; the new one's holds {5, 6, 60, 70}.
  EXPECT_EQ(Reuse(b, {1, 2, 3, 4, 5, 6, 7, 8, 0}), 4);
  BlockTable c;
  EXPECT_EQ(Reuse(c, {1, 2, 3, 4, 5, 6, 60, 70, 0}), 8);

  // Shared: the truncated sequence copies the block before writing, and the
  // cached prefix stays whole.
  m_.Truncate(a, 6);
  sa.resize(6);
  Append(a, sa, {61, 71});
  ASSERT_EQ(copies_.size(), 1u);
  EXPECT_EQ(copies_[0].src, c.blocks[1]);
  BlockTable d;
  EXPECT_EQ(Reuse(d, {1, 2, 3, 4, 5, 6, 60, 70, 0}), 8);
}

// A block shared when a truncation cut into it but private by the time it is
// written (its sharer gone, or copied away first) is written in place: it
// must lose its old name then, or a later lookup of the old prefix would
// share a block that holds other tokens.
TEST_F(PrefixCacheTest, ABlockWrittenInPlaceAfterItsSharerLeftLosesItsName) {
  BlockTable a;
  std::vector<int32_t> sa;
  Append(a, sa, {1, 2, 3, 4, 5, 6, 7, 8});
  auto b = std::make_unique<BlockTable>();
  m_.Fork(a, *b);
  m_.Truncate(a, 6);
  sa.resize(6);
  m_.Release(*b);       // the sharer goes before the write
  Append(a, sa, {60});  // position 6 written in place; the block is not full again
  EXPECT_TRUE(copies_.empty());
  BlockTable c;
  EXPECT_EQ(Reuse(c, {1, 2, 3, 4, 5, 6, 7, 8, 0}), 4);
  Append(a, sa, {70});  // full again: named after what it holds now
  BlockTable d;
  EXPECT_EQ(Reuse(d, {1, 2, 3, 4, 5, 6, 60, 70, 0}), 8);
}

TEST_F(PrefixCacheTest, TwoTruncatedSharersWriteTheirOwnBlocks) {
  BlockTable a, b;
  std::vector<int32_t> sa, sb;
  Append(a, sa, {1, 2, 3, 4, 5, 6, 7, 8});
  m_.Fork(a, b);
  sb = sa;
  m_.Truncate(a, 6);
  m_.Truncate(b, 6);
  sa.resize(6);
  sb.resize(6);
  Append(a, sa, {60, 70});  // shared: a copies
  ASSERT_EQ(copies_.size(), 1u);
  Append(b, sb, {61, 71});  // private now: b writes in place
  EXPECT_EQ(copies_.size(), 1u);
  BlockTable c;
  EXPECT_EQ(Reuse(c, {1, 2, 3, 4, 5, 6, 7, 8, 0}), 4);
  BlockTable d;
  EXPECT_EQ(Reuse(d, {1, 2, 3, 4, 5, 6, 61, 71, 0}), 8);
  EXPECT_EQ(d.blocks[1], b.blocks[1]);
  BlockTable e;
  EXPECT_EQ(Reuse(e, {1, 2, 3, 4, 5, 6, 60, 70, 0}), 8);
  EXPECT_EQ(e.blocks[1], a.blocks[1]);
}

TEST_F(PrefixCacheTest, ForkSharesNamesAndDisabledCacheReusesNothing) {
  BlockTable a;
  std::vector<int32_t> sa;
  Append(a, sa, kTen);
  BlockTable child;
  m_.Fork(a, child);
  EXPECT_EQ(child.hashes, a.hashes);
  BlockManager off(8, 4);
  BlockTable t;
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(off.Reserve(t, 8, &copies).ok());
  off.Commit(t, 8, std::vector<int32_t>(kTen.begin(), kTen.begin() + 8));
  EXPECT_TRUE(t.hashes.empty());
  off.Release(t);
  EXPECT_EQ(off.num_cached(), 0);
  BlockTable u;
  EXPECT_EQ(off.Reuse(u, kTen.data(), 10), 0);
}

TEST_F(PrefixCacheTest, AForeignTableNamesNothingAndReusesNothing) {
  // A cached prefix that a foreign table must not take.
  BlockTable a;
  std::vector<int32_t> sa;
  Append(a, sa, kTen);
  m_.Release(a);
  ASSERT_EQ(m_.num_cached(), 2);

  BlockTable f;
  f.foreign = true;
  std::vector<int32_t> sf;
  Append(f, sf, std::vector<int32_t>(kTen.begin(), kTen.begin() + 8));
  EXPECT_TRUE(f.hashes.empty());
  EXPECT_FALSE(m_.CanReuse(f));
  EXPECT_EQ(Reuse(f, kTen), 0);
  BlockTable child;
  m_.Fork(f, child);
  EXPECT_TRUE(child.foreign);
  Append(child, sf, {1, 2, 3, 4});
  EXPECT_TRUE(child.hashes.empty());
  m_.Release(child);
  EXPECT_FALSE(child.foreign);
  m_.Release(f);
  // Only the two blocks named before: the foreign ones went back unnamed.
  EXPECT_EQ(m_.num_cached(), 2);
  BlockTable b;
  EXPECT_EQ(Reuse(b, kTen), 8);
}

}  // namespace
}  // namespace llm::kv
