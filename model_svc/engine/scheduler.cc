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
  // Decodes first (a speculative one of 1 + k tokens too), then prefill
  // chunks in arrival order, then lookahead guesses: a guess takes only what
  // the callers' requests leave.
  for (Session* s : queue) {
    if (runnable(s) && s->request->append.decode) try_schedule(s);
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
  for (Session* s : queue) {
    if (!s->guess_pending()) continue;
    if (s->guess_cancelled()) {
      plan->dropped.push_back(s);
      continue;
    }
    if (budget <= 0 || logit_budget <= 0) continue;
    if (s->kv.BlocksNeeded(1) > blocks.num_free()) {
      plan->dropped.push_back(s);  // a guess evicts no one
      continue;
    }
    if (!s->kv.Reserve(1, &plan->copies).ok()) continue;
    plan->chunks.push_back(ScheduledChunk{s, 1, /*guess=*/true});
    budget -= 1;
    logit_budget -= 1;
  }
  // Blocked requests wait while others make progress (finishing frees
  // blocks or makes sessions evictable); when nothing can run, they fail.
  if (plan->chunks.empty()) plan->failed = std::move(blocked);
}

}  // namespace llm::engine
