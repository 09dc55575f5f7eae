#include "gateway/conversations.h"

#include <iterator>
#include <utility>

#include "absl/time/clock.h"
#include "common/strings.h"

namespace llm::gateway {

absl::Status CheckConversationId(std::string_view id) {
  if (id.empty() || id.size() > kMaxConversationIdBytes) {
    return absl::InvalidArgumentError(
        StrCat("X-Session-Id must have 1 to ", kMaxConversationIdBytes, " bytes, got ", id.size()));
  }
  for (const char c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == ':' || c == '-';
    if (!ok) {
      return absl::InvalidArgumentError("X-Session-Id may hold only letters, digits and . _ : -");
    }
  }
  return absl::OkStatus();
}

Conversations::Lease::~Lease() {
  if (owner_ != nullptr) owner_->Return(id_, std::move(session_));
}

absl::StatusOr<Conversations::Lease> Conversations::Take(const std::string& id) {
  absl::MutexLock lock(&mu_);
  const absl::Time now = absl::Now();
  Trim(now);
  auto it = entries_.find(id);
  if (it == entries_.end()) {
    lru_.push_front(id);
    Entry e;
    e.busy = true;
    e.last_used = now;
    e.lru = lru_.begin();
    entries_.emplace(id, std::move(e));
    Trim(now);  // room for it
    return Lease(this, id, client::Session(), /*known=*/false);
  }
  Entry& e = it->second;
  if (e.busy) {
    return absl::AbortedError("another request of this conversation (X-Session-Id) is running");
  }
  e.busy = true;
  e.last_used = now;
  lru_.splice(lru_.begin(), lru_, e.lru);
  return Lease(this, id, std::move(e.session), /*known=*/true);
}

void Conversations::Return(const std::string& id, client::Session session) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  it->second.session = std::move(session);
  it->second.busy = false;
  it->second.last_used = absl::Now();
  Trim(it->second.last_used);
}

void Conversations::Trim(absl::Time now) {
  // Oldest first: the back of lru_.
  while (!lru_.empty()) {
    auto it = entries_.find(lru_.back());
    if (it->second.busy || now - it->second.last_used <= ttl_) break;
    Drop(it);
  }
  // Over the limit: the least recently used idle ones.
  auto pos = lru_.end();
  while (static_cast<int64_t>(entries_.size()) > max_ && pos != lru_.begin()) {
    --pos;
    auto it = entries_.find(*pos);
    if (it->second.busy) continue;
    const auto after = std::next(pos);
    Drop(it);  // erases *pos
    pos = after;
  }
}

void Conversations::Drop(std::unordered_map<std::string, Entry>::iterator it) {
  if (!it->second.session.id.empty()) dropped_.push_back(std::move(it->second.session));
  lru_.erase(it->second.lru);
  entries_.erase(it);
}

std::vector<client::Session> Conversations::TakeDropped() {
  absl::MutexLock lock(&mu_);
  return std::exchange(dropped_, {});
}

int64_t Conversations::size() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(entries_.size());
}

}  // namespace llm::gateway
