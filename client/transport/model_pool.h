// The model service's replicas, as the client sees them, and session-affine
// routing over them.
//
// A model server's session ids begin with its replica id ("<pod>.<epoch>",
// ModelInfo.replica_id; the id is replica_id + "." + 16 hex digits). The pool
// holds one channel per replica address (a list, or every address a DNS
// name resolves to, model_target.h), learns each one's replica id from Info
// (and from the ids of the sessions it creates), and
//   - sends every call on a session to the replica its id names
//     (ForSession); an id whose replica no endpoint has any more goes to
//     the endpoint of the same pod under a new epoch (restarted: with
//     --session_dir it restored its sessions under their old ids, and
//     without it answers NOT_FOUND), else (the pod went away) is NOT_FOUND,
//     i.e. lost; on NOT_FOUND the caller rebuilds the session elsewhere;
//   - spreads new sessions round robin over the replicas that are up and not
//     draining (ForNewSession).
// A session that a draining replica moved to another (live migration) is
// routed by the pool's routing table (LearnLocation, Locate, below) before
// its id's replica, and looked for on every up replica before it is called
// lost.
// An endpoint that answers UNAVAILABLE is marked down (MarkDown) until a
// refresh finds it up again. Refresh() re-resolves the DNS name and calls
// Info on every endpoint; it runs when the pool is created, every
// refresh_interval (checked when a new session is placed), and when a
// session's replica or any live endpoint is missing.
//
// Threads: thread-safe (a process's generations share one pool through
// client/services.h). The endpoints' state is guarded by one mutex, held for
// a scan of the endpoints and never across a call; refreshes run one at a
// time, and a caller that waited for another's refresh takes its outcome
// instead of probing again. Endpoints are never destroyed while the pool
// lives, so an Endpoint* stays valid; its address, channel and stub never
// change.
// Cost: Refresh is one DNS lookup and one Info call per endpoint (sequential,
// each with probe_timeout); routing is a scan of the endpoints.
#ifndef LLM_CLIENT_TRANSPORT_MODEL_POOL_H_
#define LLM_CLIENT_TRANSPORT_MODEL_POOL_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/transport/model_target.h"
#include "client/transport/prefix_index.h"
#include "llm/v1/model.grpc.pb.h"

namespace llm::client {

// Makes the channel to one replica address; `server_name` is the DNS name of
// a dns:/// target (for TLS verification), "" otherwise.
using ChannelFactory = std::function<std::shared_ptr<grpc::Channel>(
    const std::string& address, const std::string& server_name)>;

struct ModelPoolOptions {
  absl::Duration probe_timeout = absl::Seconds(5);      // each Info of a refresh
  absl::Duration refresh_interval = absl::Seconds(30);  // periodic re-resolution
  // Prefix-aware placement (ForNewSessionWithPrompt): the replica holding a
  // prompt's prefix is passed over when its calls in flight exceed the
  // least busy replica's by more than this.
  int prefix_load_margin = 2;
};

class ModelPool {
 public:
  // A channel to one replica and its stub. A call holds its Connection
  // (Connect) for its whole duration.
  struct Connection {
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<v1::Model::Stub> stub;
  };
  struct Endpoint {
    std::string address;  // set when the endpoint is made, then constant
    // Guarded by the pool's mutex: read them through the pool.
    // The channel in use; replaced by a new one when an endpoint that was
    // down answers again (Probe says why).
    std::shared_ptr<const Connection> connection;
    bool used = false;        // `connection` has been probed
    v1::ModelInfo info;       // the last Info (replica_id empty until one answered)
    bool up = false;          // answered Info and not marked down since
    bool listed = true;       // in the target's addresses at the last resolution
    bool loading = false;     // the last Info was UNAVAILABLE over a ready connection
    absl::Status last_error;  // why it is not up
    // Calls of this process in flight on it (Prefill calls, open decode
    // streams: ModelClient counts them), for prefix-aware placement.
    std::atomic<int> in_flight{0};
  };

  // Parses `spec` (model_target.h). Makes no call: Refresh() does.
  static absl::StatusOr<std::unique_ptr<ModelPool>> Create(const std::string& spec,
                                                           ChannelFactory factory,
                                                           const ModelPoolOptions& options);

  // Re-resolves and calls Info on every listed endpoint. OK when at least
  // one is up; UNAVAILABLE otherwise (naming the last error).
  absl::Status Refresh();

  // The endpoint of `session_id`'s replica, or of its pod under a new epoch
  // (FindRestarted); NOT_FOUND ("lost") when no up endpoint reports either,
  // after one refresh.
  absl::StatusOr<Endpoint*> ForSession(const std::string& session_id);
  // The next up, not draining endpoint, round robin; refreshes first when
  // refresh_interval has passed or none is up. UNAVAILABLE when none is.
  absl::StatusOr<Endpoint*> ForNewSession();
  // The replica of the named session `name` (docs/client.md, "Named
  // sessions"), the first of: the routing table's replica for it (where this
  // process placed or found it) while up and not draining; the up replica
  // that holds it (Locate, not counted in relocated(): a drain may have
  // moved it off its rendezvous winner, e.g. while a rolling restart had its
  // pod away); else, of the up, not draining endpoints, the one whose pod
  // (ReplicaOf(info.replica_id)) ranks first in RendezvousOrder(name, pods)
  // (common/rendezvous.h): the same answer in every process given the same
  // replicas in any order (recorded in the table). Refreshes first as
  // ForNewSession does, and when an endpoint has never been probed.
  // UNAVAILABLE when none is up. Cost: one ListSessions per up replica the
  // first time a process routes a name (and when its table entry went
  // stale). A name never begins with a replica id: ForSession must not be
  // used for it.
  absl::StatusOr<Endpoint*> ForNamedSession(const std::string& name);
  // Prefix-aware placement (prefix_index.h) of a new session whose whole
  // history is `prompt`: the replica recorded (PlacedPrompt) for the
  // longest whole-block prefix of it, when it takes new sessions, counted in
  // prefix_routed(); when it is overloaded (its in_flight exceeds the least
  // busy replica's by more than ModelPoolOptions::prefix_load_margin), the
  // least busy replica; without a match, ForNewSession().
  absl::StatusOr<Endpoint*> ForNewSessionWithPrompt(std::span<const int32_t> prompt);
  // `endpoint` was given a new session holding `prompt`.
  void PlacedPrompt(const Endpoint* endpoint, std::span<const int32_t> prompt);
  // New sessions placed by their prompt's prefix so far.
  int64_t prefix_routed() const { return prefix_routed_.load(std::memory_order_relaxed); }
  // `endpoint` created the session `session_id`: learns its replica id
  // (a restarted server's new epoch) from it.
  void Learned(Endpoint* endpoint, const std::string& session_id);
  // `endpoint` answered UNAVAILABLE (or cancelled a stream: it is going
  // away): it gets no new session, and its sessions count as lost, until a
  // refresh finds it up.
  void MarkDown(Endpoint* endpoint, const absl::Status& why);

  // The connection to use for a call to `endpoint`.
  std::shared_ptr<const Connection> Connect(const Endpoint* endpoint) const;
  // OK when `endpoint`'s last Info says it applies token masks
  // (ModelInfo.token_mask); FAILED_PRECONDITION naming it otherwise (a
  // server older than them would ignore a mask).
  absl::Status CheckAppliesTokenMasks(const Endpoint* endpoint) const;

  // The Info of the first endpoint that answered (zero before).
  v1::ModelInfo info() const;
  // How many endpoints there are, up or not.
  size_t size() const;
  // The endpoints that are up now.
  std::vector<Endpoint*> UpEndpoints() const;
  // The target as given (for messages).
  const std::string& spec() const { return spec_; }
  // True when an endpoint's last Info said the server is still loading.
  bool any_loading() const;

  // The replica part of a session id (up to its last '.'); "" if none.
  static std::string ReplicaOf(const std::string& session_id);
  // `endpoint`'s last Info.
  v1::ModelInfo InfoOf(const Endpoint* endpoint) const;

  // Sessions that move (live migration on drain; docs/client.md "Sessions
  // that move"): a routing table session id -> replica id, which ForSession
  // consults before the replica the id names. An entry is learned from the
  // "llm-session-location" trailing metadata of a NOT_FOUND (LearnLocation)
  // or found by asking the replicas (Locate), and forgotten on Release.
  //
  // Reads `context`'s trailing "llm-session-location" after a call on
  // `session_id` failed NOT_FOUND: true when it named a replica (recorded).
  bool LearnLocation(const std::string& session_id, const grpc::ClientContext& context);
  // Records that `session_id` lives on `replica_id` now.
  void Moved(const std::string& session_id, const std::string& replica_id);
  // The replica the table holds for `session_id`; "" if none.
  std::string MovedTo(const std::string& session_id) const;
  // Drops `session_id`'s entry (the session was released).
  void Forget(const std::string& session_id);
  // The up endpoint that holds `session_id`: its table entry's, else the
  // first that lists it (ListSessions with session_id, each call with
  // probe_timeout; recorded in the table). NOT_FOUND when none does.
  // Counts the sessions found (relocated()) when `count`.
  absl::StatusOr<Endpoint*> Locate(const std::string& session_id, bool count = true);
  // How many times Locate found a session (process lifetime).
  int64_t relocated() const { return relocated_.load(std::memory_order_relaxed); }

 private:
  ModelPool(std::string spec, ModelTarget target, ChannelFactory factory,
            const ModelPoolOptions& options);
  Endpoint* Find(const std::string& replica_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // An up endpoint of the pod of `replica_id` ("<pod>.<epoch>") under
  // another epoch (the pod restarted); null if none.
  Endpoint* FindRestarted(const std::string& replica_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::shared_ptr<const Connection> NewConnection(const std::string& address) const;
  // Refreshes when no endpoint takes new sessions, when refresh_interval
  // has passed, or (`unprobed`) when a listed endpoint was never probed;
  // the refresh's error when it finds none up.
  absl::Status RefreshToPlace(bool unprobed) ABSL_LOCKS_EXCLUDED(mu_);
  // One Info call on `e` (no lock held), then its state updated under mu_.
  void Probe(Endpoint& e) ABSL_LOCKS_EXCLUDED(mu_);

  const std::string spec_;
  const ModelTarget target_;
  const ChannelFactory factory_;
  const ModelPoolOptions options_;
  absl::Mutex refresh_mu_ ABSL_ACQUIRED_BEFORE(mu_);  // one Refresh at a time
  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<Endpoint>> endpoints_ ABSL_GUARDED_BY(mu_);
  v1::ModelInfo info_ ABSL_GUARDED_BY(mu_);
  bool have_info_ ABSL_GUARDED_BY(mu_) = false;
  size_t next_ ABSL_GUARDED_BY(mu_) = 0;                                 // round robin position
  absl::Time last_refresh_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();  // when the last began
  absl::Time last_refresh_end_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Status last_refresh_status_ ABSL_GUARDED_BY(mu_);
  PrefixIndex prefixes_;
  std::atomic<int64_t> prefix_routed_{0};
  // The routing table of moved sessions (bounded: cleared past kMaxMoved
  // entries; a session it forgot is found again by Locate).
  absl::flat_hash_map<std::string, std::string> moved_ ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> relocated_{0};
};

}  // namespace llm::client

#endif  // LLM_CLIENT_TRANSPORT_MODEL_POOL_H_
