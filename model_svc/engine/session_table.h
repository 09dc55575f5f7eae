// The engine's sessions: ids, lookup, the session limit, fork and truncate
// bookkeeping, release (deferred while a request is in flight), idle expiry
// and the least-recently-used order that eviction follows.
//
// Threads: not thread-safe; the engine guards it with its mutex (the same
// one that guards the BlockManager the sessions lease from).
// Ownership: owns every session; a Session* stays valid until Erase, or
// Reclaim for a session released while busy. The BlockManager must outlive
// the table.
// Cost: Find is a hash lookup; the LeastRecentlyUsed functions and
// ExpireIdle scan every session.
#ifndef LLM_MODEL_SVC_ENGINE_SESSION_TABLE_H_
#define LLM_MODEL_SVC_ENGINE_SESSION_TABLE_H_

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/time/time.h"
#include "model_svc/engine/sequence.h"
#include "model_svc/kv/block_manager.h"

namespace llm::engine {

class SessionTable {
 public:
  // Ids are `id_prefix` and 16 random hex characters drawn from `seed`.
  SessionTable(kv::BlockManager* blocks, std::string id_prefix, int64_t max_sessions,
               uint64_t seed);

  int64_t size() const { return static_cast<int64_t>(sessions_.size()); }
  int64_t max_sessions() const { return max_sessions_; }
  bool full() const { return size() >= max_sessions_; }

  // The session with this id; null when unknown (or released).
  Session* Find(const std::string& id) const;
  // Calls f on every session in the table (not the released ones), in no
  // particular order.
  void ForEach(absl::FunctionRef<void(Session&)> f) const;

  // A new empty session with a fresh id (or `id` when not empty; the caller
  // checks that no session has it), last used `now`. Does not check the
  // limit (see full()).
  Session* Create(absl::Time now, const std::string& id = "");
  // A new session sharing the KV blocks (copy-on-write) and the tokens of
  // `parent`, which counts as used `now`.
  Session* Fork(Session& parent, absl::Time now);
  // Keeps the first n tokens of an idle session (0 <= n <= its tokens).
  void Truncate(Session& s, int64_t n, absl::Time now);

  // Removes a session from the table. An idle one is freed at once; a busy
  // one is marked released and kept until Reclaim (its request ends first).
  void Release(Session* s);
  // Frees a session that Release kept (released while busy).
  void Reclaim(Session* s);
  // Frees a session of the table (evicted, expired, or new and failed).
  void Erase(Session* s);

  // The idle session holding KV blocks that was used least recently, among
  // those holding a block that no other session shares (evicting one of
  // them frees something; a fork or a prefix-cache hit shares blocks) when
  // there are any; null if none. Eviction for KV space takes it.
  Session* LeastRecentlyUsedIdle() const;
  // The session used least recently among those without a request of their
  // caller's in flight (CallerBusy: a lookahead guess alone does not count),
  // other than `keep` (may be null); null if none. Eviction for a session
  // slot (the session limit) takes it.
  Session* LeastRecentlyUsedCallerIdle(const Session* keep) const;
  // Frees the idle sessions unused for more than `ttl`; returns how many.
  int64_t ExpireIdle(absl::Time now, absl::Duration ttl);

 private:
  kv::BlockManager* const blocks_;
  const std::string id_prefix_;
  const int64_t max_sessions_;
  std::mt19937_64 rng_;
  uint64_t created_ = 0;
  absl::flat_hash_map<std::string, std::unique_ptr<Session>> sessions_;
  std::vector<std::unique_ptr<Session>> released_;  // released while busy
};

}  // namespace llm::engine

#endif  // LLM_MODEL_SVC_ENGINE_SESSION_TABLE_H_
