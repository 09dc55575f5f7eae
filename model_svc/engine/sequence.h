// The engine's record of a sequence, a Session: the tokens whose KV is
// cached, its KV lease, counters, the caller's request in flight (its tokens
// still to compute, the logits so far) and the lookahead guess (a
// speculative row of the step plan).
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
#include <vector>

#include "absl/time/time.h"
#include "model_svc/engine/engine.h"
#include "model_svc/kv/block_manager.h"
#include "model_svc/model/logits.h"

namespace llm::engine {

// A caller's request on a session: being computed (possibly over several
// steps), or waiting for the session's lookahead guess.
struct Work {
  AppendRequest request;
  AppendCallback done;
  bool new_session = false;  // the request created the session
  int64_t offset = 0;        // tokens of the request already computed (or found cached)
  // Prefix cache: the first `reused` tokens were found cached, not computed;
  // `looked_up` once the request has been counted as a query.
  int64_t reused = 0;
  bool looked_up = false;
  std::vector<model::Logits> logits;
  int64_t remaining() const { return static_cast<int64_t>(request.tokens.size()) - offset; }
};

struct Session {
  std::string id;
  uint64_t serial = 0;          // unique for the engine's life (ids may come back)
  std::vector<int32_t> tokens;  // every token whose KV is in the cache
  kv::BlockLease kv;            // freed with the session
  absl::Time last_used;
  bool busy = false;      // a request or a lookahead guess is in flight
  bool released = false;  // Release() arrived while busy: free when the request ends
  int64_t prefilled = 0;
  int64_t decoded = 0;
  // The caller's request: in the engine's queue, or, while `guessing`,
  // parked until the guess ends.
  std::optional<Work> work;
  // Lookahead: while `guessing`, the guess `ahead_token` waits in the
  // engine's guess queue for a step, or is in the step being computed
  // (`guess_in_step`); busy is set. Once computed, `ahead` is set:
  // tokens.back() is the guess, not yet the caller's, and `ahead_logits` its
  // logits in `ahead_spec`'s encoding. The guess shares `guess_cancel` with
  // the call that it follows.
  bool guessing = false;
  bool guess_in_step = false;
  CancelFlag guess_cancel;
  bool ahead = false;
  int32_t ahead_token = -1;
  model::LogitsSpec ahead_spec;
  std::vector<model::Logits> ahead_logits;

  // Whether the request should stop (read by the scheduler).
  bool cancelled() const {
    return released ||
           (work.has_value() && work->request.cancel != nullptr && work->request.cancel->load());
  }
  bool guess_cancelled() const {
    return released || (guess_cancel != nullptr && guess_cancel->load());
  }
};

// Busy as the caller sees it: one of its requests is in flight (a lookahead
// guess alone does not count).
inline bool CallerBusy(const Session& s) { return s.busy && (!s.guessing || s.work.has_value()); }

}  // namespace llm::engine

#endif  // LLM_MODEL_SVC_ENGINE_SEQUENCE_H_
