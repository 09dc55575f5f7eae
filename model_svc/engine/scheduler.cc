#include "model_svc/engine/scheduler.h"

#include <algorithm>

namespace llm::engine {
void Schedule(const std::deque<std::unique_ptr<Pending>>& queue,
              const std::deque<Session*>& guesses, const SchedulerLimits& limits,
              const kv::BlockManager& blocks, Evictor evict, StepPlan* plan) {
  plan->Clear();
  int64_t budget = limits.max_step_tokens;
  int64_t logit_budget = limits.max_logit_rows;
  std::vector<Pending*> blocked;  // no KV blocks for them this step
  auto try_schedule = [&](Pending* p) {
    int64_t chunk = std::min(p->remaining(), budget);
    if (p->request.every_row()) chunk = std::min(chunk, logit_budget);
    if (chunk <= 0) return;
    const bool wants_logits = p->request.every_row() || chunk == p->remaining();
    if (wants_logits && logit_budget <= 0) return;
    const int32_t needed = p->session->kv.BlocksNeeded(chunk);
    if (needed > blocks.num_free() && !evict(needed)) {
      blocked.push_back(p);
      return;
    }
    if (!p->session->kv.Reserve(chunk, &plan->copies).ok()) return;
    plan->chunks.push_back(ScheduledChunk{p, p->session, chunk});
    budget -= chunk;
    if (wants_logits) logit_budget -= p->request.every_row() ? chunk : 1;
  };
  for (const auto& p : queue) {
    if (p->cancelled()) plan->cancelled.push_back(p.get());
  }
  auto not_cancelled = [&](const Pending* p) {
    return std::find(plan->cancelled.begin(), plan->cancelled.end(), p) == plan->cancelled.end();
  };
  // Decodes first, then prefill chunks in arrival order, then lookahead
  // guesses: a guess takes only what the callers' requests leave.
  for (const auto& p : queue) {
    if (p->remaining() == 1 && not_cancelled(p.get())) try_schedule(p.get());
  }
  for (const auto& p : queue) {
    if (budget <= 0) break;
    if (p->remaining() > 1 && not_cancelled(p.get())) try_schedule(p.get());
  }
  for (Session* s : guesses) {
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
    plan->chunks.push_back(ScheduledChunk{nullptr, s, 1});
    budget -= 1;
    logit_budget -= 1;
  }
  // Blocked requests wait while others make progress (finishing frees
  // blocks or makes sessions evictable); when nothing can run, they fail.
  if (plan->chunks.empty()) plan->failed = std::move(blocked);
}

}  // namespace llm::engine
