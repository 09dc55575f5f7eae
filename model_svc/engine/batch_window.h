// When the step loop starts a step: the batching-window heuristics.
//
// Gather window: the sessions of the last step usually come back with their
// next token within microseconds (in process) or a round trip (over gRPC).
// Starting the step with whoever is back first would split one batch into
// several; the loop waits a little for the rest (gather_target() queued
// requests), at most a quarter of the last step's time and kMaxGatherWindow.
// The target is the last step's request count, or the decoding sessions of
// the last two steps if more: counting the last step alone, two sessions
// that once fell out of step (one a step, alternating) stayed so, at one
// session's throughput.
//
// Decode spin: after a step of decodes, when nothing else is queued, their
// next tokens come back within a round trip; the loop watches for them
// (SpinWhileUnchanged) until spin_until() instead of sleeping on its mutex,
// which spares that round trip a thread wake-up.
//
// Threads: BatchWindow is not thread-safe (the engine guards it with its
// mutex); SpinWhileUnchanged only reads an atomic.
// Cost: Scheduled is linear in the decoders of the last two steps.
#ifndef LLM_MODEL_SVC_ENGINE_BATCH_WINDOW_H_
#define LLM_MODEL_SVC_ENGINE_BATCH_WINDOW_H_

#include <atomic>
#include <cstdint>
#include <vector>

#include "absl/time/time.h"

namespace llm::engine {

class BatchWindow {
 public:
  static constexpr absl::Duration kMaxGatherWindow = absl::Milliseconds(2);
  static constexpr absl::Duration kDecodeSpin = absl::Milliseconds(2);

  // After a step is scheduled: it holds `requests` requests, of which the
  // decodes are those of the sessions `decoders` (serials: a session may be
  // freed and another take its address).
  void Scheduled(int64_t requests, const std::vector<uint64_t>& decoders);
  // After that step ran (`step_time`, ending at `step_end`): whether it had
  // a decode, and whether requests are queued now.
  void Ran(absl::Duration step_time, absl::Time step_end, bool had_decode, bool queued);

  // How many queued requests the next step should wait for.
  int64_t gather_target() const { return gather_target_; }
  // Whether to wait for more, with `queued` requests queued (none: the loop
  // sleeps for work instead).
  bool ShouldGather(int64_t queued) const { return queued > 0 && queued < gather_target_; }
  // The longest such wait.
  absl::Duration gather_timeout() const;
  // Until when to watch for the next decodes (InfinitePast: do not).
  absl::Time spin_until() const { return spin_until_; }

 private:
  std::vector<uint64_t> decoders_[2];  // the step before the last, the last
  int64_t gather_target_ = 0;
  absl::Duration last_step_time_;
  absl::Time spin_until_ = absl::InfinitePast();
};

// Busy-waits (with a pause hint) while `counter` equals `seen` and the time
// is before `deadline`.
void SpinWhileUnchanged(const std::atomic<uint64_t>& counter, uint64_t seen, absl::Time deadline);

}  // namespace llm::engine

#endif  // LLM_MODEL_SVC_ENGINE_BATCH_WINDOW_H_
