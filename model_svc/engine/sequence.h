// The engine's record of a sequence, a Session: the tokens whose KV is
// cached, its KV lease, counters, the caller's request in flight (its tokens
// still to compute, the logits so far), the lookahead guess (a speculative
// row of the step plan) and the Truncate and Fork calls that wait for it.
//
// Threads: plain data; the engine guards every session with its mutex,
// except that the step-loop thread reads a busy session's tokens, KV table
// and request without it (only that thread changes a busy session).
// Ownership: the SessionTable owns sessions; the engine's queues point at
// them.
#ifndef LLM_MODEL_SVC_ENGINE_SEQUENCE_H_
#define LLM_MODEL_SVC_ENGINE_SEQUENCE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/time/time.h"
#include "model_svc/core/logits.h"
#include "model_svc/engine/engine.h"
#include "model_svc/kv/block_manager.h"

namespace llm::engine {

// A caller's request on a session: being computed (possibly over several
// steps), or parked while the session's guess is queued or in a step.
struct Request {
  AppendRequest append;
  AppendCallback done;
  bool new_session = false;  // the request created the session
  int64_t kept = 0;          // sync_history: the history's tokens the session held already
  int64_t offset = 0;        // tokens of the request already computed (or found cached)
  // Prefix cache: the first `reused` tokens were found cached, not computed;
  // `looked_up` once the request has been counted as a query.
  int64_t reused = 0;
  bool looked_up = false;
  std::vector<model::Logits> logits;
  int64_t remaining() const { return static_cast<int64_t>(append.tokens.size()) - offset; }
};

// The lookahead guess (engine.h, "Lookahead"): the argmax of a greedy
// request's last logits, computed before the caller sends it.
struct Guess {
  enum class State {
    kQueued,    // waits in the engine's queue for a step
    kInStep,    // in the step being computed
    kComputed,  // the session's last token, not yet the caller's
  };
  int32_t token = -1;
  State state = State::kQueued;
  model::LogitsSpec spec;  // its logits' encoding: its request's, or float32 when raw
  // It follows a masked request: its row is kept as raw float32 logits, to
  // be masked and encoded as the request that takes it asks (the client's
  // next mask is not known before that request comes).
  bool raw = false;
  CancelFlag cancel;                  // shared with the call that it follows
  std::vector<model::Logits> logits;  // once computed: its row
};

// A Truncate or Fork of a session whose guess is in the step being computed:
// it runs once that step is applied.
struct PendingTruncate {
  int64_t n;
  StatusCallback done;
};
struct PendingFork {
  ForkCallback done;
};
using PendingCall = std::variant<PendingTruncate, PendingFork>;

struct Session {
  std::string id;
  uint64_t serial = 0;          // unique for the engine's life (ids may come back)
  std::vector<int32_t> tokens;  // every token whose KV is in the cache
  kv::BlockLease kv;            // freed with the session
  absl::Time last_used;
  bool busy = false;      // a request or a queued or running guess is in flight
  bool released = false;  // Release() arrived while busy: free when the request ends
  int64_t prefilled = 0;
  int64_t decoded = 0;
  // The caller's request: in the engine's queue, or parked while the guess
  // is queued or in a step.
  std::optional<Request> request;
  // The guess: queued or in a step (the session is busy and in the engine's
  // queue), or computed (tokens.back() is its token).
  std::optional<Guess> guess;
  std::vector<PendingCall> pending;  // only while the guess is in a step

  bool guess_is(Guess::State state) const { return guess.has_value() && guess->state == state; }
  // A guess to compute: queued or in a step.
  bool guess_pending() const {
    return guess.has_value() && guess->state != Guess::State::kComputed;
  }
  // The tokens the caller knows of (not a computed guess).
  int64_t caller_tokens() const {
    return static_cast<int64_t>(tokens.size()) - (guess_is(Guess::State::kComputed) ? 1 : 0);
  }
  // Whether the request should stop (read by the scheduler).
  bool cancelled() const {
    return released || (request.has_value() && request->append.cancel != nullptr &&
                        request->append.cancel->load());
  }
  bool guess_cancelled() const {
    return released || (guess.has_value() && guess->cancel != nullptr && guess->cancel->load());
  }
};

// Busy as the caller sees it: one of its requests is in flight (a guess
// alone does not count).
inline bool CallerBusy(const Session& s) {
  return s.busy && (!s.guess_pending() || s.request.has_value());
}

}  // namespace llm::engine

#endif  // LLM_MODEL_SVC_ENGINE_SEQUENCE_H_
