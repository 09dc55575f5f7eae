#include "model_svc/engine/batch_window.h"

#include <algorithm>
#include <utility>

#include "absl/time/clock.h"

namespace llm::engine {
namespace {

inline void CpuRelaxHint() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

void BatchWindow::Scheduled(int64_t requests, const std::vector<uint64_t>& decoders) {
  std::swap(decoders_[0], decoders_[1]);
  decoders_[1] = decoders;
  int64_t both = static_cast<int64_t>(decoders_[1].size());
  for (uint64_t serial : decoders_[0]) {
    both += std::find(decoders_[1].begin(), decoders_[1].end(), serial) == decoders_[1].end();
  }
  gather_target_ = std::max(requests, both);
}

void BatchWindow::Ran(absl::Duration step_time, absl::Time step_end, bool had_decode, bool queued) {
  last_step_time_ = step_time;
  // Watch for the next tokens only when nothing else is queued (a queued
  // prefill chunk must not wait for the watch to end).
  spin_until_ = had_decode && !queued ? step_end + kDecodeSpin : absl::InfinitePast();
}

absl::Duration BatchWindow::gather_timeout() const {
  return std::min(last_step_time_ / 4, kMaxGatherWindow);
}

void SpinWhileUnchanged(const std::atomic<uint64_t>& counter, uint64_t seen, absl::Time deadline) {
  while (counter.load(std::memory_order_acquire) == seen && absl::Now() < deadline) {
    CpuRelaxHint();
  }
}

}  // namespace llm::engine
