// Where the engine puts the sessions it evicts for memory, and finds them
// again (EngineOptions::spill; the model server's --kv_spill_dir is a
// SpillStore of files, server/spill_dir.h).
//
// When the engine evicts an idle session (for KV space, or for a slot under
// the session limit: EngineStats::evicted_sessions and
// evicted_for_session_limit), it copies the session's tokens and their KV
// into a snapshot (snapshot/snapshot.h) and hands it to Spill instead of
// dropping it. A later call on that id that the engine does not hold
// (Submit, TruncateAsync, ForkAsync, ExportSession, Restore) Takes it back
// and imports it under the same id first (Engine::ImportSession), then goes
// on: the caller does not notice, and the session's prefilled/decoded
// counters start from 0 (restored, not rebuilt). A store that cannot keep a
// session (full, failing) drops it: its next call gets NOT_FOUND, as
// without a store.
//
// Threads: every method may be called from any thread, concurrently.
// Spill is called by the engine under its lock (on the step-loop thread, or
// a caller's admitting a new session): it must not block (queue the work).
// Take is called without the engine's lock, on the caller's thread.
#ifndef LLM_MODEL_SVC_ENGINE_SPILL_STORE_H_
#define LLM_MODEL_SVC_ENGINE_SPILL_STORE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model_svc/snapshot/snapshot.h"

namespace llm::engine {

// What a store did, for the metrics (llm_kv_spill_total{outcome}).
struct SpillCounts {
  int64_t spilled = 0;   // sessions written to the store
  int64_t restored = 0;  // sessions taken back and imported
  int64_t dropped = 0;   // sessions not kept (no room in the quota, or pushed out of it)
  int64_t failed = 0;    // sessions lost to an error (a write, a read, a corrupt snapshot)
  int64_t bytes = 0;     // bytes the store holds now
  int64_t sessions = 0;  // sessions the store holds now
};

class SpillStore {
 public:
  virtual ~SpillStore() = default;
  // Keeps `s`, the snapshot of session `id` that the engine evicts (it
  // replaces one the store held under that id). Must not block.
  virtual void Spill(const std::string& id, snapshot::Snapshot s) = 0;
  // The encoded snapshot of session `id`, which the store then no longer
  // holds: NOT_FOUND when it holds none; another error when it held one it
  // cannot read back (counted as failed), at most `max_bytes` long.
  virtual absl::StatusOr<std::string> Take(const std::string& id, int64_t max_bytes) = 0;
  // How the import of what Take returned for `id` ended (counted: restored
  // or failed).
  virtual void Restored(const std::string& id, const absl::Status& status) = 0;
  // Forgets session `id` (its client released it); whether it held it.
  virtual bool Forget(const std::string& id) = 0;
  virtual SpillCounts Counts() const = 0;
};

}  // namespace llm::engine

#endif  // LLM_MODEL_SVC_ENGINE_SPILL_STORE_H_
