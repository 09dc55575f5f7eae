// The scheduler: which work the next step computes, as data.
//
// From the queue of requests (arrival order) and the KV block pool, Schedule
// returns a StepPlan: the chunks to compute (one token of every waiting
// decode first, then prefill chunks in arrival order, then lookahead
// guesses, within the step's token and logit-row budgets), the KV block
// copies to perform before the forward, and the requests that end unrun this
// step (cancelled, guesses without KV space, and, when nothing at all can
// run, the requests that found no KV blocks). The engine performs the plan:
// the runner computes its chunks, and the engine applies the result.
//
// Mutation: planning is all that Schedule does, except that it reserves the
// KV blocks of every planned chunk on its session's lease (as vLLM's
// scheduler allocates) and calls `evict` when the pool is short. It changes
// no request, completes nothing, and neither takes a lock nor calls the
// model.
// Threads: not thread-safe; the engine calls it under its mutex.
// Cost: linear in the queue, times the number of ended requests.
#ifndef LLM_MODEL_SVC_ENGINE_SCHEDULER_H_
#define LLM_MODEL_SVC_ENGINE_SCHEDULER_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "absl/functional/function_ref.h"
#include "model_svc/engine/sequence.h"
#include "model_svc/kv/block_manager.h"

namespace llm::engine {

// `chunk` tokens of `pending`, from its offset.
struct ScheduledChunk {
  Pending* pending;
  int64_t chunk;
  // Whether this chunk returns logits: a row per token when the request
  // wants every row, else one for its last token when the chunk ends it.
  int64_t logit_rows() const {
    if (pending->request.every_row()) return chunk;
    return chunk == pending->remaining() ? 1 : 0;
  }
};

struct StepPlan {
  std::vector<ScheduledChunk> chunks;  // in the batch's order
  std::vector<kv::BlockCopy> copies;   // to perform before the forward
  std::vector<Pending*> cancelled;     // end now: CANCELLED (a guess: unrun)
  std::vector<Pending*> failed;        // end now: the KV pool is full
  void Clear() {
    chunks.clear();
    copies.clear();
    cancelled.clear();
    failed.clear();
  }
};

struct SchedulerLimits {
  int64_t max_step_tokens = 512;  // tokens per step
  int64_t max_logit_rows = 512;   // logit rows per step
};

// Frees idle sessions until `needed` blocks are free; false if it cannot.
using Evictor = absl::FunctionRef<bool(int32_t needed)>;

// Fills `plan` (cleared first) with the next step over `queue`. A request's
// cancellation is read once: one planned now runs this step (its flag may be
// set meanwhile; the next plan ends it). A guess never evicts: without KV
// space it is cancelled. A request without KV space (after eviction) waits
// while others make progress, and fails when the plan has no chunk.
void Schedule(const std::deque<std::unique_ptr<Pending>>& queue, const SchedulerLimits& limits,
              const kv::BlockManager& blocks, Evictor evict, StepPlan* plan);

}  // namespace llm::engine

#endif  // LLM_MODEL_SVC_ENGINE_SCHEDULER_H_
