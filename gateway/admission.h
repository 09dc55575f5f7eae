// Admission of the gateway's generating requests: at most `max_active`
// generate at once; up to `max_queued` more wait for a place, first come
// first served, each for at most `queue_timeout`; past that a request is
// refused at once, with how long to wait before retrying (the gateway sends
// it as Retry-After with its 429).
//
//   absl::StatusOr<Admission::Ticket> ticket = admission.Enter();
//   if (!ticket.ok()) ... 429 (ResourceExhausted) or 503 (Unavailable: stopping)
//   ... generate; the ticket's destructor makes room for the next request
//
// A queue in front of the limit is what lets a client's batch (LangChain's
// batch of 100, an evaluation harness) through a gateway sized for fewer at
// once, instead of failing the part that arrives while it is full.
//
// Threads: every method may be called from any thread. Cost: Enter is a
// mutex and, when queued, a condition wait; a place freed wakes the queue.
#ifndef LLM_GATEWAY_ADMISSION_H_
#define LLM_GATEWAY_ADMISSION_H_

#include <cstdint>
#include <list>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace llm::gateway {

struct AdmissionOptions {
  int max_active = 64;   // --max_concurrent
  int max_queued = 128;  // --max_queued; 0: no queue
  absl::Duration queue_timeout = absl::Seconds(30);
};

class Admission {
 public:
  // A place among the active requests, given back by the destructor.
  class Ticket {
   public:
    Ticket(Ticket&& other) noexcept : owner_(std::exchange(other.owner_, nullptr)) {}
    Ticket& operator=(Ticket&&) = delete;
    ~Ticket();
    // How long the request waited in the queue.
    absl::Duration waited() const { return waited_; }

   private:
    friend class Admission;
    Ticket(Admission* owner, absl::Duration waited) : owner_(owner), waited_(waited) {}
    Admission* owner_;
    absl::Duration waited_;
  };

  explicit Admission(const AdmissionOptions& options) : options_(options) {}
  // Wakes the waiting requests (Unavailable) and refuses new ones.
  ~Admission() { Stop(); }

  // A place now, or after waiting in the queue. ResourceExhausted when the
  // queue is full or the wait ran out (the message says which, and the
  // limits); Unavailable once Stop() was called.
  absl::StatusOr<Ticket> Enter();
  // Refuses new requests and wakes the waiting ones.
  void Stop();

  int active() const;
  int queued() const;
  const AdmissionOptions& options() const { return options_; }

 private:
  void Leave();

  const AdmissionOptions options_;
  mutable absl::Mutex mu_;
  int active_ ABSL_GUARDED_BY(mu_) = 0;
  // The waiting requests in arrival order; each waits until it is first.
  std::list<int64_t> queue_ ABSL_GUARDED_BY(mu_);
  int64_t next_waiter_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace llm::gateway

#endif  // LLM_GATEWAY_ADMISSION_H_
