#include "model_svc/server/step_watchdog.h"

#include <cstdio>

namespace llm {

bool StepWatchdog::Check(absl::Time now) {
  const engine::EngineStats s = stats_();
  const bool pending = s.running + s.waiting > 0;
  const bool healthy = !pending || now - s.heartbeat <= limit_;
  if (healthy != healthy_) {
    healthy_ = healthy;
    if (healthy) {
      std::fprintf(stderr, "model_server: the step loop is back; SERVING\n");
    } else {
      std::fprintf(stderr,
                   "model_server: the step loop has not gone round for %.1f s with %lld requests "
                   "pending; NOT_SERVING\n",
                   absl::ToDoubleSeconds(now - s.heartbeat),
                   static_cast<long long>(s.running + s.waiting));
    }
    set_serving_(healthy);
  }
  return healthy;
}

void StepWatchdog::Start(absl::Duration period) {
  thread_ = std::thread([this, period] {
    absl::MutexLock lock(&mu_);
    while (!mu_.AwaitWithTimeout(absl::Condition(&stop_), period)) {
      mu_.Unlock();
      Check(absl::Now());
      mu_.Lock();
    }
  });
}

void StepWatchdog::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

}  // namespace llm
