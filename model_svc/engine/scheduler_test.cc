// The scheduler on hand-made sessions, requests and guesses: no model, no
// threads.
#include "model_svc/engine/scheduler.h"

#include <atomic>
#include <deque>
#include <memory>
#include <vector>

#include "gtest/gtest.h"

namespace llm::engine {
namespace {

class SchedulerTest : public ::testing::Test {
 protected:
  SchedulerTest() : blocks_(16, 4) {}

  // A session holding n computed tokens.
  Session* NewSession(int64_t n = 0) {
    auto s = std::make_unique<Session>();
    s->kv = kv::BlockLease(&blocks_);
    std::vector<kv::BlockCopy> copies;
    EXPECT_TRUE(s->kv.Reserve(n, &copies).ok());
    s->tokens.assign(n, 1);
    s->kv.Commit(n, s->tokens);
    s->busy = true;
    sessions_.push_back(std::move(s));
    return sessions_.back().get();
  }

  // Queues a request of n tokens on s.
  Session* Queue(Session* s, int64_t n, bool decode = false) {
    s->request.emplace();
    s->request->append.tokens.assign(n, 2);
    s->request->append.decode = decode;
    queue_.push_back(s);
    return s;
  }

  // Takes every free block (for a session that is not queued).
  void FillThePool() {
    Session* s = NewSession();
    std::vector<kv::BlockCopy> copies;
    ASSERT_TRUE(s->kv.Reserve(int64_t{blocks_.num_free()} * blocks_.block_size(), &copies).ok());
    ASSERT_EQ(blocks_.num_free(), 0);
  }

  // Gives s a lookahead guess waiting for its row.
  Session* Guess(Session* s, int32_t token) {
    s->guess = engine::Guess{.token = token};
    queue_.push_back(s);
    return s;
  }

  StepPlan Plan(int64_t tokens, int64_t logit_rows, bool evicts = false,
                int64_t prefill_tokens = 0) {
    StepPlan plan;
    Schedule(
        queue_, SchedulerLimits{tokens, logit_rows, prefill_tokens}, blocks_,
        [&](int32_t needed) {
          evictions_.push_back(needed);
          return evicts;
        },
        &plan);
    return plan;
  }

  kv::BlockManager blocks_;
  std::vector<std::unique_ptr<Session>> sessions_;  // declared after blocks_
  std::deque<Session*> queue_;
  std::vector<int32_t> evictions_;
};

TEST_F(SchedulerTest, DecodesFirstThenPrefillChunksInArrivalOrderWithinTheBudget) {
  Session* a = Queue(NewSession(), 10);
  Session* b = Queue(NewSession(3), 1, /*decode=*/true);
  Session* c = Queue(NewSession(), 10);
  const StepPlan plan = Plan(8, 8);
  ASSERT_EQ(plan.chunks.size(), 2u);
  EXPECT_EQ(plan.chunks[0].session, b);
  EXPECT_EQ(plan.chunks[0].chunk, 1);
  EXPECT_EQ(plan.chunks[0].logit_rows(), 1);
  EXPECT_EQ(plan.chunks[1].session, a);
  EXPECT_EQ(plan.chunks[1].chunk, 7);
  EXPECT_EQ(plan.chunks[1].logit_rows(), 0);  // not its last chunk
  // Blocks are reserved for the planned chunks, not counted as computed.
  EXPECT_EQ(a->kv.blocks().size(), 2u);
  EXPECT_EQ(a->kv.num_tokens(), 0);
  EXPECT_EQ(b->kv.blocks().size(), 1u);
  EXPECT_TRUE(c->kv.blocks().empty());
  EXPECT_TRUE(plan.copies.empty());
  EXPECT_TRUE(plan.cancelled.empty());
  EXPECT_TRUE(plan.failed.empty());
  EXPECT_TRUE(evictions_.empty());
}

// With a prefill target, a step takes further requests' prefills only while
// it holds fewer prefill tokens than the target: the decodes all go in, the
// first prefill always, short prompts together until the target is reached.
TEST_F(SchedulerTest, APrefillTargetGivesEachLongPromptItsOwnStep) {
  Session* decode = Queue(NewSession(3), 1, /*decode=*/true);
  Session* a = Queue(NewSession(), 12);
  Queue(NewSession(), 12);
  StepPlan plan = Plan(64, 64, /*evicts=*/false, /*prefill_tokens=*/8);
  ASSERT_EQ(plan.chunks.size(), 2u);
  EXPECT_EQ(plan.chunks[0].session, decode);
  EXPECT_EQ(plan.chunks[1].session, a);
  EXPECT_EQ(plan.chunks[1].chunk, 12);
  queue_.clear();
  Session* s1 = Queue(NewSession(), 3);
  Session* s2 = Queue(NewSession(), 3);
  Session* s3 = Queue(NewSession(), 3);
  Queue(NewSession(), 3);
  plan = Plan(64, 64, /*evicts=*/false, /*prefill_tokens=*/8);
  ASSERT_EQ(plan.chunks.size(), 3u);  // 9 prefill tokens: the third reached 8
  EXPECT_EQ(plan.chunks[0].session, s1);
  EXPECT_EQ(plan.chunks[1].session, s2);
  EXPECT_EQ(plan.chunks[2].session, s3);
}

TEST_F(SchedulerTest, ASpeculativeDecodeOfSeveralTokensKeepsDecodePriority) {
  Session* prefill = Queue(NewSession(), 10);
  Session* spec = Queue(NewSession(3), 5, /*decode=*/true);  // sampled + 4 proposed
  spec->request->append.all_logits = true;
  const StepPlan plan = Plan(8, 8);
  ASSERT_EQ(plan.chunks.size(), 2u);
  EXPECT_EQ(plan.chunks[0].session, spec);
  EXPECT_EQ(plan.chunks[0].chunk, 5);
  EXPECT_EQ(plan.chunks[0].logit_rows(), 5);
  EXPECT_TRUE(plan.chunks[0].decode());
  EXPECT_EQ(plan.chunks[1].session, prefill);
  EXPECT_EQ(plan.chunks[1].chunk, 3);
}

TEST_F(SchedulerTest, EveryRowRequestsAreBoundByTheLogitRows) {
  Session* a = Queue(NewSession(), 6);
  a->request->append.all_logits = true;
  Session* b = Queue(NewSession(), 2);  // wants its last row: none left
  const StepPlan plan = Plan(16, 4);
  ASSERT_EQ(plan.chunks.size(), 1u);
  EXPECT_EQ(plan.chunks[0].session, a);
  EXPECT_EQ(plan.chunks[0].chunk, 4);
  EXPECT_EQ(plan.chunks[0].logit_rows(), 4);
  EXPECT_TRUE(b->kv.blocks().empty());
}

TEST_F(SchedulerTest, CancelledAndReleasedRequestsEndUnplanned) {
  Session* a = Queue(NewSession(), 3);
  a->request->append.cancel = std::make_shared<std::atomic<bool>>(true);
  Session* b = Queue(NewSession(2), 1, true);
  b->released = true;
  Session* c = Queue(NewSession(), 3);
  const StepPlan plan = Plan(16, 16);
  ASSERT_EQ(plan.chunks.size(), 1u);
  EXPECT_EQ(plan.chunks[0].session, c);
  EXPECT_EQ(plan.cancelled, (std::vector<Session*>{a, b}));
  EXPECT_TRUE(a->kv.blocks().empty());
}

TEST_F(SchedulerTest, AGuessIsASpeculativeRowAmongTheDecodesInArrivalOrder) {
  Session* s = Guess(NewSession(3), 7);
  Session* decode = Queue(NewSession(2), 1, true);
  const StepPlan plan = Plan(16, 16);
  ASSERT_EQ(plan.chunks.size(), 2u);
  const ScheduledChunk& row = plan.chunks[0];
  EXPECT_TRUE(row.guess);
  EXPECT_EQ(row.session, s);
  EXPECT_EQ(row.chunk, 1);
  EXPECT_EQ(row.logit_rows(), 1);
  EXPECT_TRUE(row.decode());
  EXPECT_EQ(plan.chunks[1].session, decode);
  EXPECT_EQ(s->kv.num_tokens(), 3);  // reserved, not computed
  EXPECT_TRUE(plan.dropped.empty());
}

// A guess is a greedy generation's next decode: a prompt queued before it
// (a burst of them) must not hold it back.
TEST_F(SchedulerTest, AGuessRunsBeforePrefillChunksAndNeverEvicts) {
  Session* prefill = Queue(NewSession(), 8);
  Session* s = Guess(NewSession(4), 7);  // its block is full: the guess needs a new one
  StepPlan plan = Plan(8, 8);
  ASSERT_EQ(plan.chunks.size(), 2u);
  EXPECT_EQ(plan.chunks[0].session, s);
  EXPECT_TRUE(plan.chunks[0].guess);
  EXPECT_EQ(plan.chunks[1].session, prefill);
  EXPECT_EQ(plan.chunks[1].chunk, 7);  // what the guess left of the budget
  EXPECT_TRUE(plan.dropped.empty());

  // Without a free block, it is dropped (a guess evicts no one).
  Session* t = Guess(NewSession(4), 7);
  FillThePool();
  queue_ = {t};
  plan = Plan(8, 8);
  EXPECT_TRUE(plan.chunks.empty());
  EXPECT_EQ(plan.dropped, std::vector<Session*>{t});
  EXPECT_TRUE(plan.failed.empty());
  EXPECT_TRUE(evictions_.empty());
}

TEST_F(SchedulerTest, ACancelledOrReleasedGuessIsDropped) {
  Session* cancelled = Guess(NewSession(1), 7);
  cancelled->guess->cancel = std::make_shared<std::atomic<bool>>(true);
  Session* released = Guess(NewSession(1), 7);
  released->released = true;
  const StepPlan plan = Plan(16, 16);
  EXPECT_TRUE(plan.chunks.empty());
  EXPECT_EQ(plan.dropped, (std::vector<Session*>{cancelled, released}));
}

TEST_F(SchedulerTest, ARequestWithoutKvSpaceWaitsWhileOthersRunAndFailsAlone) {
  Session* small = Queue(NewSession(2), 1, true);  // fits in its block
  Session* big = NewSession();
  Session* blocked = Queue(big, 8);
  FillThePool();
  StepPlan plan = Plan(16, 16);
  ASSERT_EQ(plan.chunks.size(), 1u);
  EXPECT_EQ(plan.chunks[0].session, small);
  EXPECT_EQ(evictions_, std::vector<int32_t>{2});
  EXPECT_TRUE(plan.failed.empty());  // it waits

  queue_.pop_front();
  plan = Plan(16, 16);
  EXPECT_TRUE(plan.chunks.empty());
  EXPECT_EQ(plan.failed, std::vector<Session*>{blocked});
}

TEST_F(SchedulerTest, WritingIntoASharedBlockPlansACopy) {
  Session* parent = NewSession(6);
  Session* child = NewSession();
  child->kv = parent->kv.Fork();
  Queue(child, 1, true);  // position 6: in the shared second block
  const StepPlan plan = Plan(16, 16);
  ASSERT_EQ(plan.chunks.size(), 1u);
  ASSERT_EQ(plan.copies.size(), 1u);
  EXPECT_EQ(plan.copies[0].src, parent->kv.blocks()[1]);
  EXPECT_EQ(plan.copies[0].dst, child->kv.blocks()[1]);
  EXPECT_EQ(child->kv.blocks()[0], parent->kv.blocks()[0]);
}

}  // namespace
}  // namespace llm::engine
