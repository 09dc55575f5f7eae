#include "gateway/admission.h"

#include "absl/time/clock.h"
#include "common/strings.h"

namespace llm::gateway {
namespace {

// "1 request", "2 requests".
std::string Requests(int64_t n) { return StrCat(n, n == 1 ? " request" : " requests"); }

}  // namespace

Admission::Ticket::~Ticket() {
  if (owner_ != nullptr) owner_->Leave();
}

absl::StatusOr<Admission::Ticket> Admission::Enter() {
  const absl::Time arrival = absl::Now();
  absl::MutexLock lock(&mu_);
  if (stopped_) return absl::UnavailableError("the gateway is shutting down");
  if (active_ < options_.max_active && queue_.empty()) {
    ++active_;
    return Ticket(this, absl::ZeroDuration());
  }
  if (static_cast<int>(queue_.size()) >= options_.max_queued) {
    return absl::ResourceExhaustedError(
        StrCat("the gateway is busy: ", Requests(options_.max_active),
               " generating (--max_concurrent) and ", Requests(static_cast<int64_t>(queue_.size())),
               " waiting (--max_queued ", options_.max_queued, "); retry later"));
  }
  const int64_t me = next_waiter_++;
  const auto place = queue_.insert(queue_.end(), me);
  const auto my_turn = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopped_ || (queue_.front() == me && active_ < options_.max_active);
  };
  const bool admitted =
      mu_.AwaitWithDeadline(absl::Condition(&my_turn), arrival + options_.queue_timeout);
  queue_.erase(place);
  if (stopped_) return absl::UnavailableError("the gateway is shutting down");
  if (!admitted) {
    return absl::ResourceExhaustedError(
        StrCat("the gateway is busy: no place freed within ",
               absl::FormatDuration(options_.queue_timeout), " (--queue_timeout) with ",
               Requests(options_.max_active), " generating (--max_concurrent); retry later"));
  }
  ++active_;
  return Ticket(this, absl::Now() - arrival);
}

void Admission::Leave() {
  absl::MutexLock lock(&mu_);
  --active_;
}

void Admission::Stop() {
  absl::MutexLock lock(&mu_);
  stopped_ = true;
}

int Admission::active() const {
  absl::MutexLock lock(&mu_);
  return active_;
}

int Admission::queued() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(queue_.size());
}

}  // namespace llm::gateway
