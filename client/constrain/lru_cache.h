// A thread-safe, bounded, least-recently-used cache of computed values with
// single flight: GetOrCompute(key, f) returns the value cached under `key`,
// or runs f() once while other callers of the same key wait for its result
// (a compiled grammar is computed once however many requests ask for it).
//
// Bounds: at most max_entries entries and about max_bytes bytes (each
// entry's cost is its key's size plus cost(value)); after each insertion the
// least recently used finished entries go until both hold. An entry whose
// value alone is over max_bytes is returned but not kept. Entries still being
// computed are never evicted (they are at most one per computing thread).
//
// Threads: every method is thread-safe; f() and cost() run outside the lock.
// Cost: a hit is a hash lookup and a list splice under one mutex.
#ifndef LLM_CLIENT_CONSTRAIN_LRU_CACHE_H_
#define LLM_CLIENT_CONSTRAIN_LRU_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace llm::constrain {

template <typename V>
class LruCache {
 public:
  struct Stats {
    int64_t hits = 0;
    int64_t misses = 0;
    int64_t evictions = 0;
    size_t entries = 0;
    size_t bytes = 0;
  };

  LruCache(size_t max_entries, size_t max_bytes, std::function<size_t(const V&)> cost)
      : max_entries_(max_entries), max_bytes_(max_bytes), cost_(std::move(cost)) {}

  V GetOrCompute(const std::string& key, const std::function<V()>& compute) {
    std::shared_ptr<Slot> slot;
    {
      absl::MutexLock lock(&mu_);
      if (auto it = index_.find(key); it != index_.end()) {
        ++hits_;
        lru_.splice(lru_.begin(), lru_, it->second);
        slot = it->second->slot;
        mu_.Await(absl::Condition(&slot->ready));
        return *slot->value;
      }
      ++misses_;
      slot = std::make_shared<Slot>();
      lru_.push_front(Entry{key, slot});
      index_[key] = lru_.begin();
    }
    V value = compute();
    const size_t bytes = key.size() + cost_(value);
    absl::MutexLock lock(&mu_);
    slot->value = value;
    slot->bytes = bytes;
    slot->ready = true;
    bytes_ += bytes;
    if (bytes > max_bytes_) Erase(key);  // returned, not kept
    Evict();
    return value;
  }

  Stats stats() const {
    absl::MutexLock lock(&mu_);
    return {hits_, misses_, evictions_, lru_.size(), bytes_};
  }

 private:
  struct Slot {
    bool ready = false;
    std::optional<V> value;
    size_t bytes = 0;
  };
  struct Entry {
    std::string key;
    std::shared_ptr<Slot> slot;
  };
  using List = std::list<Entry>;

  void Erase(const std::string& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = index_.find(key);
    if (it == index_.end()) return;
    bytes_ -= it->second->slot->bytes;
    lru_.erase(it->second);
    index_.erase(it);
  }

  // Drops finished entries from the least recently used end while over a
  // bound.
  void Evict() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = lru_.end();
    while ((lru_.size() > max_entries_ || bytes_ > max_bytes_) && it != lru_.begin()) {
      --it;
      if (!it->slot->ready) continue;
      bytes_ -= it->slot->bytes;
      index_.erase(it->key);
      it = lru_.erase(it);
      ++evictions_;
    }
  }

  const size_t max_entries_;
  const size_t max_bytes_;
  const std::function<size_t(const V&)> cost_;
  mutable absl::Mutex mu_;
  List lru_ ABSL_GUARDED_BY(mu_);  // most recently used first
  absl::flat_hash_map<std::string, typename List::iterator> index_ ABSL_GUARDED_BY(mu_);
  size_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t hits_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t misses_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t evictions_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace llm::constrain

#endif  // LLM_CLIENT_CONSTRAIN_LRU_CACHE_H_
