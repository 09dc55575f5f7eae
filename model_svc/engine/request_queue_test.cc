// The request queue without a model or threads: requests admitted, steps
// planned and their results applied by hand.
#include "model_svc/engine/request_queue.h"

#include <atomic>
#include <optional>
#include <vector>

#include "gtest/gtest.h"

namespace llm::engine {
namespace {

class RequestQueueTest : public ::testing::Test {
 protected:
  RequestQueueTest()
      : queue_(Options(), /*max_context=*/64, /*kv_blocks=*/8, /*kv_block_size=*/4,
               SchedulerLimits{64, 64}, /*id_seed=*/1, &submitted_) {}

  static EngineOptions Options() {
    EngineOptions o;
    o.prefix_cache = true;
    return o;
  }

  // Admits a request, runs one step with `status` as the forward's, and
  // returns the request's result.
  absl::StatusOr<AppendResult> Step(const std::string& session, std::vector<int32_t> tokens,
                                    absl::Status status = absl::OkStatus()) {
    AppendRequest r;
    r.session_id = session;
    r.tokens = std::move(tokens);
    std::optional<absl::StatusOr<AppendResult>> result;
    AppendCallback done = [&](absl::StatusOr<AppendResult> res) { result = std::move(res); };
    std::vector<Completion> completions;
    if (absl::Status s = queue_.Admit(r, done, &completions); !s.ok()) return s;
    StepPlan plan;
    queue_.Plan(&plan, &completions);
    std::vector<model::Logits> logits;
    for (const ScheduledChunk& c : plan.chunks) logits.resize(logits.size() + c.logit_rows());
    std::vector<Deferred> calls;  // none: no Truncate or Fork here
    queue_.Apply(plan, status, logits, &completions, &calls);
    for (Completion& c : completions) c.done(std::move(c.result));
    EXPECT_TRUE(result.has_value());
    return result.has_value() ? *std::move(result) : absl::InternalError("no result");
  }

  int64_t TokensOf(const std::string& id) {
    for (const SessionInfo& s : queue_.ListSessions(absl::Now())) {
      if (s.id == id) return s.num_tokens;
    }
    return -1;
  }

  std::atomic<uint64_t> submitted_{0};
  RequestQueue queue_;
};

// A request on an existing session that found cached blocks and then failed
// before computing anything leaves the session as it was: its caller knows
// nothing of the cached tokens.
TEST_F(RequestQueueTest, AFailedRequestGivesBackTheTokensTheCacheGaveIt) {
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 6, 7, 8};
  auto a = Step("", prompt);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(queue_.Release(a->session_id).ok());
  EXPECT_EQ(queue_.Stats().kv_blocks_cached, 2);

  auto b = Step("", {1, 2, 3, 4});  // computed (a lookup leaves the last token)
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(TokensOf(b->session_id), 4);

  // Positions 4-7 are found cached; the step that would compute 9 fails.
  auto failed = Step(b->session_id, {5, 6, 7, 8, 9}, absl::InternalError("forward failed"));
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(queue_.Stats().prefix_cache_hits, 4);
  EXPECT_EQ(TokensOf(b->session_id), 4);
  for (const SessionInfo& s : queue_.ListSessions(absl::Now())) {
    EXPECT_EQ(s.prefilled_tokens, 4);
  }

  // The same request again: found cached again, then computed.
  auto ok = Step(b->session_id, {5, 6, 7, 8, 9});
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->num_tokens, 9);
  EXPECT_EQ(ok->cached_tokens, 4);
  EXPECT_EQ(queue_.Stats().prefix_cache_hits, 8);
}

}  // namespace
}  // namespace llm::engine
