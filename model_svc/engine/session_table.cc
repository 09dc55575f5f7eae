#include "model_svc/engine/session_table.h"

#include <algorithm>
#include <utility>

namespace llm::engine {

SessionTable::SessionTable(kv::BlockManager* blocks, std::string id_prefix, int64_t max_sessions,
                           uint64_t seed)
    : blocks_(blocks), id_prefix_(std::move(id_prefix)), max_sessions_(max_sessions), rng_(seed) {}

Session* SessionTable::Find(const std::string& id) const {
  auto it = sessions_.find(id);
  return it == sessions_.end() ? nullptr : it->second.get();
}

void SessionTable::ForEach(absl::FunctionRef<void(Session&)> f) const {
  for (const auto& [id, s] : sessions_) f(*s);
}

Session* SessionTable::Create(absl::Time now, const std::string& wanted) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id = wanted;
  while (id.empty() || (wanted.empty() && sessions_.contains(id))) {
    id = id_prefix_;
    uint64_t r = rng_();
    for (int i = 0; i < 16; ++i, r >>= 4) id.push_back(kHex[r & 15]);
  }
  auto session = std::make_unique<Session>();
  session->id = id;
  session->kv = kv::BlockLease(blocks_);
  session->serial = ++created_;
  session->last_used = now;
  Session* s = session.get();
  sessions_.emplace(id, std::move(session));
  return s;
}

Session* SessionTable::Fork(Session& parent, absl::Time now) {
  Session* child = Create(now);
  child->kv = parent.kv.Fork();
  child->tokens = parent.tokens;
  parent.last_used = now;
  return child;
}

void SessionTable::Truncate(Session& s, int64_t n, absl::Time now) {
  s.kv.Truncate(n);
  s.tokens.resize(n);
  s.last_used = now;
}

void SessionTable::Release(Session* s) {
  auto it = sessions_.find(s->id);
  if (s->busy) {
    s->released = true;
    released_.push_back(std::move(it->second));
  }
  sessions_.erase(it);  // frees an idle session and its blocks
}

void SessionTable::Reclaim(Session* s) {
  released_.erase(std::find_if(released_.begin(), released_.end(),
                               [s](const auto& r) { return r.get() == s; }));
}

void SessionTable::Erase(Session* s) { sessions_.erase(sessions_.find(s->id)); }

Session* SessionTable::LeastRecentlyUsedIdle() const {
  Session* lru = nullptr;
  bool lru_frees = false;
  for (const auto& [id, s] : sessions_) {
    if (s->busy || s->kv.blocks().empty()) continue;
    const std::vector<int32_t>& b = s->kv.blocks();
    const bool frees = std::any_of(b.begin(), b.end(),
                                   [&](int32_t block) { return blocks_->ref_count(block) == 1; });
    if (lru == nullptr || (frees && !lru_frees) ||
        (frees == lru_frees && s->last_used < lru->last_used)) {
      lru = s.get();
      lru_frees = frees;
    }
  }
  return lru;
}

Session* SessionTable::LeastRecentlyUsedCallerIdle(const Session* keep) const {
  Session* lru = nullptr;
  for (const auto& [id, s] : sessions_) {
    if (s.get() == keep || CallerBusy(*s)) continue;
    if (lru == nullptr || s->last_used < lru->last_used) lru = s.get();
  }
  return lru;
}

int64_t SessionTable::ExpireIdle(absl::Time now, absl::Duration ttl) {
  std::vector<std::string> expired;
  for (const auto& [id, s] : sessions_) {
    if (!s->busy && now - s->last_used > ttl) expired.push_back(id);
  }
  for (const std::string& id : expired) sessions_.erase(id);
  return static_cast<int64_t>(expired.size());
}

}  // namespace llm::engine
