// Live migration on drain (model_server --peers): a draining replica moves
// its sessions to its peers under the same ids, so that their clients go on
// without re-prefill (docs/operations.md, "A rolling update with zero
// re-prefill").
//
// At SIGTERM, for each session the migrator marks it moving in the service's
// MovedSessions (new calls on it wait), waits for the request in flight on it
// to end (a decode step of a stream, a prefill), exports it (Engine::ExportSession, uncompressed:
// on a pod network the zstd pass costs more than it saves for f16 KV) and streams it to a peer with
// ImportSession under its id (SessionChunk.session_id). The peer is the
// first in RendezvousOrder(session_id, pods) (common/rendezvous.h; a pod is
// ModelPool::ReplicaOf(Info.replica_id)) among the peers that are up and
// not draining, then the next on any failure (FAILED_PRECONDITION: another
// model; RESOURCE_EXHAUSTED: full; ALREADY_EXISTS; UNAVAILABLE ...). Moved:
// the session is released here and its calls get NOT_FOUND with
// "llm-session-location: <peer replica_id>". No peer took it: it stays here,
// dropped at exit as without --peers (or saved by --session_dir), counted
// failed (llm_sessions_migrated_total{outcome}) and not tried again.
//
// Threads: Pass runs up to `parallel` moves at once on threads of its own
// and returns when they end; one Pass at a time. Cost: each move holds one
// snapshot (the session's KV, ~tokens x layers x 2 x kv_dim x 2 bytes in
// f16) in memory, copied once into 1 MiB chunks.
#ifndef LLM_MODEL_SVC_SERVER_MIGRATION_H_
#define LLM_MODEL_SVC_SERVER_MIGRATION_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/transport/model_pool.h"
#include "model_svc/engine/engine.h"
#include "model_svc/server/model_metrics.h"
#include "model_svc/server/moved_sessions.h"

namespace llm {

struct MigrationOptions {
  std::string replica_id;                          // this server's (skipped among the peers)
  int parallel = 4;                                // moves at once
  absl::Duration rpc_timeout = absl::Seconds(60);  // each ImportSession
};

struct MigrationCounts {
  int64_t moved = 0;
  int64_t failed = 0;
  int64_t bytes = 0;    // snapshot bytes sent for the sessions moved
  int64_t tokens = 0;   // their tokens
  absl::Duration busy;  // the sum of the moves' times
};

class SessionMigrator {
 public:
  // Borrows all four; `metrics` may be null.
  SessionMigrator(engine::Engine& engine, client::ModelPool& peers, MovedSessions& moved,
                  ModelMetrics* metrics, MigrationOptions options);

  // Tries every session not tried yet, `parallel` at once: each is marked
  // moving (its next call waits), then moved once the request in flight on
  // it, if any, has ended. Returns how many sessions are left to try (still
  // busy at `deadline`, or not reached by then).
  int64_t Pass(absl::Time deadline);

  MigrationCounts counts() const;

 private:
  struct Peer {
    std::string replica_id;
    std::string pod;
    client::ModelPool::Endpoint* endpoint;
  };
  // Session `id` as the engine lists it (a default SessionInfo if gone).
  engine::SessionInfo Info(const std::string& id) const;
  // Drops a stale copy of `id` on `peer` (best effort).
  void ReleaseOnPeer(const Peer& peer, const std::string& id);
  // The up, not draining peers (a refresh of the pool at most every second).
  std::vector<Peer> Peers();
  enum class Outcome { kMoved, kFailed, kGone, kRetry };
  // Moves one session (kGone: it is no longer here; kRetry: a call changed
  // it during the move, the peer's copy was dropped).
  Outcome Move(const std::string& id, const std::vector<Peer>& peers);
  // Streams `bytes` to `peer` as session `id`.
  absl::Status Send(const Peer& peer, const std::string& id, const std::string& bytes);

  engine::Engine& engine_;
  client::ModelPool& peers_;
  MovedSessions& moved_;
  ModelMetrics* const metrics_;
  const MigrationOptions options_;
  absl::Time last_refresh_ = absl::InfinitePast();  // Pass's thread only
  mutable absl::Mutex mu_;
  absl::flat_hash_set<std::string> tried_ ABSL_GUARDED_BY(mu_);  // moved or failed
  MigrationCounts counts_ ABSL_GUARDED_BY(mu_);
};

}  // namespace llm

#endif  // LLM_MODEL_SVC_SERVER_MIGRATION_H_
