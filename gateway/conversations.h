// Conversations that keep their model session between chat requests: a
// client names one with the X-Session-Id header, and the gateway appends
// only what the new request adds to the tokens that session holds.
//
// Each entry is the client library's copy of one model session
// (client::Session: its id and tokens). A request checks the entry out for
// its whole duration (Take) and back in at its end (Lease's destructor); a
// second request on the same conversation meanwhile is refused (Aborted:
// 409). Entries idle longer than `idle_ttl` are forgotten, and past
// `max_conversations` the least recently used idle one is dropped; their
// model sessions are handed to the next Lease (TakeDropped) for release (the
// model service's own TTL frees any that are never released).
//
// Threads: every method is thread-safe. Cost: O(log n) a call, O(n) for a
// sweep of expired entries (at most once per Take).
#ifndef LLM_GATEWAY_CONVERSATIONS_H_
#define LLM_GATEWAY_CONVERSATIONS_H_

#include <cstdint>
#include <list>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/generate/ports.h"

namespace llm::gateway {

// The longest X-Session-Id, and its alphabet: [A-Za-z0-9._:-].
inline constexpr size_t kMaxConversationIdBytes = 128;
// InvalidArgument (never echoing the id) unless `id` is 1..128 of those bytes.
absl::Status CheckConversationId(std::string_view id);

class Conversations {
 public:
  Conversations(int64_t max_conversations, absl::Duration idle_ttl)
      : max_(max_conversations), ttl_(idle_ttl) {}

  class Lease {
   public:
    Lease(Lease&& other) noexcept
        : owner_(std::exchange(other.owner_, nullptr)),
          id_(std::move(other.id_)),
          session_(std::move(other.session_)),
          known_(other.known_) {}
    Lease& operator=(Lease&&) = delete;
    ~Lease();
    // The conversation's session: empty for a new conversation.
    client::Session& session() { return session_; }
    // Whether the conversation existed (its session may still be empty).
    bool known() const { return known_; }

   private:
    friend class Conversations;
    Lease(Conversations* owner, std::string id, client::Session session, bool known)
        : owner_(owner), id_(std::move(id)), session_(std::move(session)), known_(known) {}
    Conversations* owner_;
    std::string id_;
    client::Session session_;
    bool known_;
  };

  // Checks out conversation `id` (a new one when unknown or expired).
  // Aborted when another request holds it.
  absl::StatusOr<Lease> Take(const std::string& id);
  // Model sessions of dropped conversations, to be released by the caller.
  std::vector<client::Session> TakeDropped();
  int64_t size() const;

 private:
  struct Entry {
    client::Session session;
    absl::Time last_used;
    bool busy = false;
    std::list<std::string>::iterator lru;  // position in lru_ (front: most recent)
  };
  void Return(const std::string& id, client::Session session);
  // Drops idle entries past the TTL, then the least recent idle ones over max_.
  void Trim(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Drop(std::unordered_map<std::string, Entry>::iterator it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int64_t max_;
  const absl::Duration ttl_;
  mutable absl::Mutex mu_;
  std::unordered_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  std::list<std::string> lru_ ABSL_GUARDED_BY(mu_);
  std::vector<client::Session> dropped_ ABSL_GUARDED_BY(mu_);
};

}  // namespace llm::gateway

#endif  // LLM_GATEWAY_CONVERSATIONS_H_
