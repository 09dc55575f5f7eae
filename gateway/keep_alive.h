// HTTP keep-alive for the gateway, without letting idle connections take
// civetweb's worker threads.
//
// civetweb gives each connection a worker thread for its whole life, also
// while a kept-alive connection waits for its next request. A client's pool
// of idle connections could therefore hold every worker, and new clients
// would wait for an idle one to time out. So:
//   - the server gets `max_idle` workers more than it needs for requests
//     (Threads: max_concurrent generating + 8 for quick requests + max_idle);
//   - a response leaves its connection open only if, when its request
//     arrived, at most `max_idle` connections were open (this one included).
//     Every idle kept-alive connection passed that check at its last request,
//     with all the others already open, so at most `max_idle` connections are
//     ever idle-and-kept: the other workers stay free for requests;
//   - a request whose body is unbounded (chunked) or over --max_body_bytes
//     closes its connection (civetweb would otherwise read and discard the
//     rest of the body to reach the next request), as do streamed responses
//     (no Content-Length: their end is the connection's) and 401s (an
//     unauthenticated client holds no idle connection);
//   - an idle connection is closed after `timeout` without a new request.
//
// Threads: Opened / Closed / MayKeepOpen may be called concurrently.
#ifndef LLM_GATEWAY_KEEP_ALIVE_H_
#define LLM_GATEWAY_KEEP_ALIVE_H_

#include <atomic>
#include <cstdint>

#include "absl/time/time.h"

namespace llm::gateway {

class KeepAlive {
 public:
  // Workers civetweb keeps for requests beyond the generating ones.
  static constexpr int kQuickWorkers = 8;

  // `timeout` zero: keep-alive off (every response closes its connection).
  KeepAlive(absl::Duration timeout, int max_idle)
      : timeout_(timeout), max_idle_(timeout > absl::ZeroDuration() ? max_idle : 0) {}

  bool enabled() const { return max_idle_ > 0; }
  absl::Duration timeout() const { return timeout_; }
  int max_idle() const { return max_idle_; }

  // civetweb's worker threads for `max_concurrent` generating requests.
  int Threads(int max_concurrent) const { return max_concurrent + kQuickWorkers + max_idle_; }

  // A connection was accepted / closed (civetweb's init_connection and
  // connection_close callbacks).
  void Opened() { open_.fetch_add(1, std::memory_order_relaxed); }
  void Closed() { open_.fetch_sub(1, std::memory_order_relaxed); }
  int open() const { return open_.load(std::memory_order_relaxed); }

  // At a request's start: whether its connection may stay open after the
  // response. `content_length`: the request's Content-Length, -1 if none;
  // `chunked`: its body is chunked; `max_body`: --max_body_bytes.
  bool MayKeepOpen(int64_t content_length, bool chunked, int64_t max_body) const {
    return enabled() && !chunked && content_length <= max_body && open() <= max_idle_;
  }

 private:
  const absl::Duration timeout_;
  const int max_idle_;
  std::atomic<int> open_{0};
};

}  // namespace llm::gateway

#endif  // LLM_GATEWAY_KEEP_ALIVE_H_
