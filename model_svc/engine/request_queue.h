// The engine's sessions and requests as a state machine without threads:
// admission (the checks that need the sessions), each session's lookahead
// guess (engine.h, "Lookahead"; sequence.h's Guess), the Truncate and Fork
// calls that wait for a guess's step, the prefix-cache lookup, the plan of
// the next step
// (scheduler.h) and the application of its result (vLLM's
// update_from_output), eviction and expiry, and the completions all of these
// produce. The engine (engine.cc) adds the lock, the step-loop thread, its
// waits and the runner.
//
// Threads: not thread-safe: the engine calls every method under its mutex.
// No callback is called
// here: completions and deferred calls are handed back, for the caller to
// make outside its lock.
// Ownership: owns the KV block pool's bookkeeping and every session.
// Cost: Admit, Truncate, Fork and Release take constant time (eviction scans
// the sessions); Plan and Apply are linear in the queues.
#ifndef LLM_MODEL_SVC_ENGINE_REQUEST_QUEUE_H_
#define LLM_MODEL_SVC_ENGINE_REQUEST_QUEUE_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "model_svc/core/logits.h"
#include "model_svc/engine/engine.h"
#include "model_svc/engine/scheduler.h"
#include "model_svc/engine/sequence.h"
#include "model_svc/engine/session_table.h"
#include "model_svc/kv/block_manager.h"

namespace llm::engine {

// A request's completion, to deliver outside the lock.
struct Completion {
  AppendCallback done;
  absl::StatusOr<AppendResult> result;
};

// A callback's call to make outside the lock.
using Deferred = absl::AnyInvocable<void()>;

class RequestQueue {
 public:
  // `id_seed` draws the session ids; `limits` bound every step's plan. Each
  // request queued (or guess made) increments `*submitted` (release order),
  // which the engine's loop watches without its lock; it must outlive the
  // queue.
  RequestQueue(const EngineOptions& options, int64_t max_context, int32_t kv_blocks,
               int32_t kv_block_size, SchedulerLimits limits, uint64_t id_seed,
               std::atomic<uint64_t>* submitted);

  // The checks that need no session (no lock): INVALID_ARGUMENT for no
  // tokens, a token id, top_n or prompt_logprobs out of range.
  static absl::Status Validate(const AppendRequest& request, int32_t vocab_size);

  // Queues a validated request on its session (a new one when it names
  // none), or fails it with the error table's status (engine.h). A request
  // that takes a computed lookahead guess and needs nothing more completes
  // at once (into `completions`), as may a guess it makes obsolete.
  absl::Status Admit(AppendRequest& request, AppendCallback& done,
                     std::vector<Completion>* completions);
  // Engine::TruncateAsync and ForkAsync: the call of `done` to make, or
  // null when the call waits for the session's guess in the step being
  // computed (Apply runs it and hands its `done` back).
  Deferred Truncate(const std::string& id, int64_t n, StatusCallback done);
  Deferred Fork(const std::string& id, ForkCallback done);
  absl::Status Release(const std::string& id);
  // Session snapshots (the engine calls these between steps). The caller's
  // tokens of session `id` and the blocks holding their KV, in order: NOT_FOUND,
  // or ABORTED while a request of its caller's is in flight (a lookahead
  // guess is left out, not waited for).
  absl::Status ExportView(const std::string& id, std::vector<int32_t>* tokens,
                          std::vector<int32_t>* blocks);
  // A new session holding `tokens` (at most the context) in fresh foreign
  // blocks (kv/block_manager.h: never shared through the prefix cache), which
  // `write` fills; the session is gone again when `write` fails. Makes room
  // as a new request would (the session limit, then idle sessions for KV
  // space); RESOURCE_EXHAUSTED (marked with its limit) when it cannot.
  // `id` not empty: the session gets that id (ALREADY_EXISTS when a session
  // has it); empty: a fresh one.
  absl::StatusOr<std::string> Import(
      std::vector<int32_t> tokens,
      absl::FunctionRef<absl::Status(const std::vector<int32_t>&)> write,
      const std::string& id = "");

  // Called with the tokens of an idle session (its caller's) and the blocks
  // holding their KV just before eviction frees them (for the spill store);
  // not for a session whose guess is in the step.
  using EvictHook = absl::AnyInvocable<void(const std::string& id, std::vector<int32_t> tokens,
                                            const std::vector<int32_t>& blocks)>;
  void SetEvictHook(EvictHook hook) { on_evict_ = std::move(hook); }
  // Whether a session (not released) has this id.
  bool Holds(const std::string& id) const { return sessions_.Find(id) != nullptr; }

  std::vector<SessionInfo> ListSessions(absl::Time now) const;
  // The counters, sessions and KV figures (not running, waiting, steps,
  // step_time or heartbeat: the loop's).
  EngineStats Stats() const;
  // Requests and guesses queued or in the step.
  int64_t Queued() const;

  // Frees the idle sessions unused for more than `ttl`.
  void ExpireIdle(absl::Time now, absl::Duration ttl);
  // Plans the next step (prefix-cache lookups first, then scheduler.h's
  // Schedule) and ends the requests that the plan ends: the cancelled ones
  // and, when nothing can run, those without KV space.
  void Plan(StepPlan* plan, std::vector<Completion>* completions);
  // Applies a step's result: the computed tokens join their sessions, the
  // logits their requests, finished requests complete (a lookahead
  // request's guess is queued); a computed guess becomes its session's
  // unconfirmed last token, and the Truncate and Fork calls that waited for
  // it run (their `done` calls go to `calls`). A failed step fails every
  // request in it. `logits` holds the plan's rows in order (Runner::Forward).
  void Apply(const StepPlan& plan, const absl::Status& status, std::vector<model::Logits>& logits,
             std::vector<Completion>* completions, std::vector<Deferred>* calls);
  // Ends every request and guess with UNAVAILABLE (shutting down).
  void EndAll(std::vector<Completion>* completions);

 private:
  absl::Status FindIdle(const std::string& id, Session** out);
  absl::Status FindSettled(const std::string& id, Session** out);
  Session* WaitsForGuess(const std::string& id);
  absl::Status MakeRoomForSession(const Session* keep);
  void Unqueue(Session* s);
  void Resume(Session* s, std::vector<Completion>* out);
  void ReuseCachedPrefix(Session* s);
  void StartGuess(Session* s, int32_t token, const model::LogitsSpec& spec,
                  const CancelFlag& cancel, bool raw);
  void EndGuess(Session* s, const absl::Status& status, std::vector<model::Logits> logits,
                std::vector<Completion>* out);
  void DropGuess(Session* s, std::vector<Completion>* out);
  bool EvictFor(int32_t needed);
  void BeforeEvict(const Session& s);
  void Finish(Session* s, absl::StatusOr<AppendResult> result, std::vector<Completion>* out);

  const int64_t max_context_;
  const SchedulerLimits limits_;
  kv::BlockManager blocks_;
  SessionTable sessions_;  // leases from blocks_: declared after it
  // Sessions with a request, or a guess (Session::guess_pending), queued or
  // in the step, in arrival order.
  std::deque<Session*> queue_;
  EngineStats stats_;
  std::atomic<uint64_t>* const submitted_;
  EvictHook on_evict_;
};

}  // namespace llm::engine

#endif  // LLM_MODEL_SVC_ENGINE_REQUEST_QUEUE_H_
