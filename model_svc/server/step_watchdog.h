// Readiness that follows a live step loop: the model server is NOT_SERVING
// while the engine has work pending (running or waiting requests) and its
// step loop has not gone round (EngineStats::heartbeat) for `limit`; it turns
// SERVING again when the loop is back. Liveness is not affected: a busy
// server must never be restarted for being slow.
//
// Check() is the whole logic, with the time passed in (tests); Start() runs
// it on a thread every `period`.
// Threads: Check() from one thread at a time; Start()/Stop() from the owner.
#ifndef LLM_MODEL_SVC_SERVER_STEP_WATCHDOG_H_
#define LLM_MODEL_SVC_SERVER_STEP_WATCHDOG_H_

#include <functional>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "model_svc/engine/engine.h"

namespace llm {

class StepWatchdog {
 public:
  // `stats`: the engine's; `set_serving`: called on every change (and not
  // otherwise); `limit` > 0.
  StepWatchdog(std::function<engine::EngineStats()> stats,
               std::function<void(bool serving)> set_serving, absl::Duration limit)
      : stats_(std::move(stats)), set_serving_(std::move(set_serving)), limit_(limit) {}
  ~StepWatchdog() { Stop(); }

  // Whether the loop is healthy at `now`; calls set_serving on a change.
  bool Check(absl::Time now);

  void Start(absl::Duration period);
  // Joins the thread; no set_serving call after it returns.
  void Stop();

 private:
  std::function<engine::EngineStats()> stats_;
  std::function<void(bool)> set_serving_;
  const absl::Duration limit_;
  bool healthy_ = true;
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace llm

#endif  // LLM_MODEL_SVC_SERVER_STEP_WATCHDOG_H_
