#include "model_svc/server/moved_sessions.h"

namespace llm {

void MovedSessions::Begin(const std::string& id) {
  absl::MutexLock lock(&mu_);
  moves_[id] = "";
  any_.store(true, std::memory_order_release);
}

void MovedSessions::End(const std::string& id, const std::string& replica) {
  absl::MutexLock lock(&mu_);
  if (replica.empty()) {
    moves_.erase(id);
  } else {
    moves_[id] = replica;
  }
}

std::string MovedSessions::Wait(const std::string& id) const {
  if (!any_.load(std::memory_order_acquire)) return "";
  absl::MutexLock lock(&mu_);
  const auto settled = [this, &id]() ABSL_NO_THREAD_SAFETY_ANALYSIS {  // under mu_
    const auto it = moves_.find(id);
    return it == moves_.end() || !it->second.empty();
  };
  mu_.AwaitWithTimeout(absl::Condition(&settled), kMoveWait);
  const auto it = moves_.find(id);
  return it == moves_.end() ? "" : it->second;
}

}  // namespace llm
