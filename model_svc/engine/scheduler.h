// The scheduler: which work the next step computes, as data.
//
// From the queue of sessions with a request or a lookahead guess to compute
// (arrival order) and the KV block pool, Schedule returns a StepPlan: the rows to compute (every
// waiting decode first, one token or the 1 + k of a speculative one, with the lookahead guesses
// as speculative rows among them, then prefill chunks in arrival order up to
// SchedulerLimits::prefill_tokens, within the step's token and logit-row budgets), the KV block
// copies to perform before the forward, and
// what ends unrun this step (cancelled requests and guesses, guesses without
// KV space, and, when nothing at all can run, the requests that found no KV
// blocks). The engine performs the plan:
// the runner computes its chunks, and the engine applies the result.
//
// Mutation: planning is all that Schedule does, except that it reserves the
// KV blocks of every planned chunk on its session's lease (as vLLM's
// scheduler allocates) and calls `evict` when the pool is short. It changes
// no request or guess, completes nothing, and neither takes a lock nor calls
// the model.
// Threads: not thread-safe; the engine calls it under its mutex.
// Cost: linear in the queue, times the number of ended requests.
#ifndef LLM_MODEL_SVC_ENGINE_SCHEDULER_H_
#define LLM_MODEL_SVC_ENGINE_SCHEDULER_H_

#include <cstdint>
#include <deque>
#include <vector>

#include "absl/functional/function_ref.h"
#include "model_svc/engine/sequence.h"
#include "model_svc/kv/block_manager.h"

namespace llm::engine {

// `chunk` tokens of the session's request, from its offset; or the
// speculative row of the session's lookahead guess (one token, guess->token,
// whose logits come back as guess->spec asks).
struct ScheduledChunk {
  Session* session;
  int64_t chunk;
  bool guess = false;
  // Counted as a decode (statistics, the batch window): a guess is one.
  bool decode() const { return guess || session->request->append.decode; }
  // The logits this chunk returns: a row per token when the request wants
  // every row, else one for its last token when the chunk ends it.
  int64_t logit_rows() const {
    if (guess) return 1;
    if (session->request->append.every_row()) return chunk;
    return chunk == session->request->remaining() ? 1 : 0;
  }
};

struct StepPlan {
  std::vector<ScheduledChunk> chunks;  // in the batch's order
  std::vector<kv::BlockCopy> copies;   // to perform before the forward
  std::vector<Session*> cancelled;     // requests that end now: CANCELLED
  std::vector<Session*> failed;        // requests that end now: the KV pool is full
  std::vector<Session*> dropped;       // guesses that end unrun
  void Clear() {
    chunks.clear();
    copies.clear();
    cancelled.clear();
    failed.clear();
    dropped.clear();
  }
};

struct SchedulerLimits {
  int64_t max_step_tokens = 512;  // tokens per step
  int64_t max_logit_rows = 512;   // logit rows per step
  // > 0: a step takes the next request's prefill chunk only while it holds
  // fewer prefill tokens than this (the first prefill chunk always goes in).
  // Where a step's prefill costs the same per token from a few dozen tokens
  // on (a CPU), one more request's prefill in the step only delays the
  // first token of the ones already in it; in turn, each gets its own step.
  // 0: prefill chunks fill max_step_tokens.
  int64_t prefill_tokens = 0;
};

// Frees idle sessions until `needed` blocks are free; false if it cannot.
using Evictor = absl::FunctionRef<bool(int32_t needed)>;

// Fills `plan` (cleared first) with the next step over `queue`: sessions
// with a request, or with a queued guess (Session::guess_pending), in
// arrival order. A cancellation is read once: a request or guess planned now runs this step
// (its flag may be set meanwhile; the next plan ends it). A guess never
// evicts: without KV space it is dropped. A request without KV space (after
// eviction) waits while others make progress, and fails when the plan has
// no chunk.
void Schedule(const std::deque<Session*>& queue, const SchedulerLimits& limits,
              const kv::BlockManager& blocks, Evictor evict, StepPlan* plan);

}  // namespace llm::engine

#endif  // LLM_MODEL_SVC_ENGINE_SCHEDULER_H_
