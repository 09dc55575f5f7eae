// The sessions a draining model server moved to a peer (live migration,
// migration.h), and those it is moving now: the "moved-table".
//
// A call on a session that moved is answered NOT_FOUND with the trailing
// metadata "llm-session-location: <peer replica_id>" (model.proto), so that
// its client sends it there at once; a call on a session being moved waits
// for the move to end (then it is answered as moved, or goes on here when
// the move failed).
//
// Threads: thread-safe. Cost: a call on any session takes one atomic load
// while no session ever moved; a lookup under one mutex after that. Wait
// blocks its caller (a gRPC thread) for as long as the move takes, at most
// kMoveWait: only during a drain, only for calls on a session in transfer.
// Memory: one entry per session moved (the server exits after its drain).
#ifndef LLM_MODEL_SVC_SERVER_MOVED_SESSIONS_H_
#define LLM_MODEL_SVC_SERVER_MOVED_SESSIONS_H_

#include <atomic>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace llm {

// The trailing metadata key of a moved session's NOT_FOUND.
inline constexpr char kSessionLocationKey[] = "llm-session-location";

class MovedSessions {
 public:
  // The longest a call waits for a move in progress.
  static constexpr absl::Duration kMoveWait = absl::Seconds(30);

  // Session `id` is being moved: calls on it wait (Wait) until End.
  void Begin(const std::string& id);
  // The move of `id` ended: to `replica` (a peer's replica_id), or, when
  // `replica` is empty, not at all (the session stays here).
  void End(const std::string& id, const std::string& replica);
  // The replica session `id` moved to, "" if it did not move; waits while
  // it is being moved (at most kMoveWait; then "").
  std::string Wait(const std::string& id) const;

 private:
  std::atomic<bool> any_{false};  // an entry was ever added
  mutable absl::Mutex mu_;
  // id -> the peer's replica_id; "" while the move is in progress.
  absl::flat_hash_map<std::string, std::string> moves_ ABSL_GUARDED_BY(mu_);
};

}  // namespace llm

#endif  // LLM_MODEL_SVC_SERVER_MOVED_SESSIONS_H_
