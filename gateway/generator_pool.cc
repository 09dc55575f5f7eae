#include "gateway/generator_pool.h"

#include <utility>

#include "common/strings.h"

namespace llm::gateway {

GeneratorPool::Lease::~Lease() {
  if (pool_ != nullptr) pool_->GiveBack(std::move(generator_), discard_);
}

void GeneratorPool::AddIdle(std::unique_ptr<client::Generator> g) {
  std::lock_guard<std::mutex> lock(mu_);
  idle_.push_back(std::move(g));
}

absl::StatusOr<GeneratorPool::Lease> GeneratorPool::Acquire() {
  std::unique_ptr<client::Generator> g;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (active_ >= max_active_) {
      return absl::ResourceExhaustedError(
          StrCat("the gateway is generating ", max_active_,
                 " answers already (--max_concurrent); try again later"));
    }
    ++active_;
    if (!idle_.empty()) {
      g = std::move(idle_.back());
      idle_.pop_back();
    }
  }
  if (g == nullptr) {
    // Connect outside the lock; a service that is down fails fast (no wait
    // for a loading one: the request would hang).
    client::ClientOptions options = options_;
    options.ready_timeout = absl::ZeroDuration();
    absl::StatusOr<std::unique_ptr<client::Generator>> connected =
        client::Generator::Connect(options);
    if (!connected.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      --active_;
      return connected.status();
    }
    g = *std::move(connected);
  }
  g->ClearCancel();
  return Lease(this, std::move(g));
}

void GeneratorPool::GiveBack(std::unique_ptr<client::Generator> g, bool discard) {
  std::lock_guard<std::mutex> lock(mu_);
  --active_;
  if (g != nullptr && !discard) idle_.push_back(std::move(g));
}

int GeneratorPool::active() const {
  std::lock_guard<std::mutex> lock(mu_);
  return active_;
}

}  // namespace llm::gateway
