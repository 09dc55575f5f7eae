// Conversations (the X-Session-Id header) live in the model tier, not in the
// gateway: each one is a named model session (client/generate/ports.h,
// Session::named; docs/client.md, "Named sessions") whose name is derived
// from the id alone, placed by rendezvous hashing of that name over the
// model replicas' pods (ModelPool::ForNamedSession). Every turn sends the
// whole rendered conversation with sync_history; the model server keeps
// what its session holds of it and computes the rest. So any gateway
// process, given the replicas in any order, sends a conversation's turns to
// the replica that holds its KV, and the loss of a gateway loses nothing.
// Two requests at once on one conversation: the model server answers the
// second ABORTED (its session is busy), which the gateway answers 409; one
// gateway process also remembers which conversations it is running
// (RunningConversations), so that it answers the second 409 at once, before
// its admission queue (which would answer 429).
//
// Threads: the functions are pure; RunningConversations is thread-safe.
#ifndef LLM_GATEWAY_CONVERSATIONS_H_
#define LLM_GATEWAY_CONVERSATIONS_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace llm::gateway {

// The longest X-Session-Id, and its alphabet: [A-Za-z0-9._:-].
inline constexpr size_t kMaxConversationIdBytes = 128;
// InvalidArgument (never echoing the id) unless `id` is 1..128 of those bytes.
absl::Status CheckConversationId(std::string_view id);

// The model session name of conversation `id` (a valid one): "conv-" + id
// when the id is in the session id alphabet (letters, digits, '-', '_',
// '.'), else "convh-" + 32 hex digits of a fixed 128-bit hash of it (an id
// with ':'). Fixed forever: every gateway process, and every version, must
// derive the same name. At most 133 bytes (the model server takes up to 200).
std::string ConversationSessionName(std::string_view id);

// The conversations this gateway process has a request of running. Cost:
// O(1) a call.
class RunningConversations {
 public:
  // Holds a conversation as running until destroyed.
  class Claim {
   public:
    Claim(Claim&& other) noexcept
        : owner_(std::exchange(other.owner_, nullptr)), id_(std::move(other.id_)) {}
    Claim& operator=(Claim&&) = delete;
    ~Claim();

   private:
    friend class RunningConversations;
    Claim(RunningConversations* owner, std::string id) : owner_(owner), id_(std::move(id)) {}
    RunningConversations* owner_;
    std::string id_;
  };
  // Aborted when a request of conversation `id` is running here already.
  absl::StatusOr<Claim> Start(const std::string& id);

 private:
  absl::Mutex mu_;
  absl::flat_hash_set<std::string> running_ ABSL_GUARDED_BY(mu_);
};

}  // namespace llm::gateway

#endif  // LLM_GATEWAY_CONVERSATIONS_H_
