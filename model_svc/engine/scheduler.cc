#include "model_svc/engine/scheduler.h"

#include <algorithm>

namespace llm::engine {
void Schedule(const std::deque<Session*>& queue, const SchedulerLimits& limits,
              const kv::BlockManager& blocks, Evictor evict, StepPlan* plan) {
  plan->Clear();
  int64_t budget = limits.max_step_tokens;
  int64_t logit_budget = limits.max_logit_rows;
  std::vector<Session*> blocked;  // no KV blocks for them this step
  auto try_schedule = [&](Session* s) {
    const Request& r = *s->request;
    int64_t chunk = std::min(r.remaining(), budget);
    if (r.append.every_row()) chunk = std::min(chunk, logit_budget);
    if (chunk <= 0) return;
    const bool wants_logits = r.append.every_row() || chunk == r.remaining();
    if (wants_logits && logit_budget <= 0) return;
    const int32_t needed = s->kv.BlocksNeeded(chunk);
    if (needed > blocks.num_free() && !evict(needed)) {
      blocked.push_back(s);
      return;
    }
    if (!s->kv.Reserve(chunk, &plan->copies).ok()) return;
    plan->chunks.push_back(ScheduledChunk{s, chunk});
    budget -= chunk;
    if (wants_logits) logit_budget -= r.append.every_row() ? chunk : 1;
  };
  // A session in the queue has a guess to compute, or else a request.
  for (Session* s : queue) {
    if (!s->guess_pending() && s->cancelled()) plan->cancelled.push_back(s);
  }
  auto runnable = [&](const Session* s) {
    return !s->guess_pending() &&
           std::find(plan->cancelled.begin(), plan->cancelled.end(), s) == plan->cancelled.end();
  };
  // A queued guess: dropped when cancelled or without KV space (a guess
  // evicts no one), else planned when the budgets allow.
  auto try_guess = [&](Session* s) {
    if (s->guess_cancelled()) {
      plan->dropped.push_back(s);
      return;
    }
    if (budget <= 0 || logit_budget <= 0) return;
    if (s->kv.BlocksNeeded(1) > blocks.num_free()) {
      plan->dropped.push_back(s);
      return;
    }
    if (!s->kv.Reserve(1, &plan->copies).ok()) return;
    plan->chunks.push_back(ScheduledChunk{s, 1, /*guess=*/true});
    budget -= 1;
    logit_budget -= 1;
  };
  // Decodes first (a speculative one of 1 + k tokens too) and the lookahead
  // guesses with them, in arrival order: a guess is the next decode of a
  // greedy generation, which its caller is about to send (or has sent, parked
  // on the guess). Then prefill chunks in arrival order.
  for (Session* s : queue) {
    if (s->guess_pending()) {
      try_guess(s);
    } else if (runnable(s) && s->request->append.decode) {
      try_schedule(s);
    }
  }
  int64_t prefill = 0;  // prefill tokens planned
  for (Session* s : queue) {
    if (budget <= 0 || (limits.prefill_tokens > 0 && prefill >= limits.prefill_tokens)) break;
    if (runnable(s) && !s->request->append.decode) {
      const int64_t before = budget;
      try_schedule(s);
      prefill += before - budget;
    }
  }
  // Blocked requests wait while others make progress (finishing frees
  // blocks or makes sessions evictable); when nothing can run, they fail.
  if (plan->chunks.empty()) plan->failed = std::move(blocked);
}

}  // namespace llm::engine
