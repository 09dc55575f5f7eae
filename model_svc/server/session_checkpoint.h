// model_server --session_dir with --session_checkpoint_seconds: sessions
// written to the session directory while the server runs, so that a
// process killed without a drain (SIGKILL, a crash, the OOM killer) comes
// back with them as of their last checkpoint.
//
// A thread looks at the engine's sessions every period/2 (at most every
// second): each one idle (no request in flight) for at least `period` and
// changed since it last wrote it (its token count or its prefilled + decoded
// count differs) is exported (Engine::ExportSession: its KV copied on the
// step-loop thread between steps, which waits for it: tens of ms for a
// 2k-token session of SmolLM2-135M, bench/README.md; the encoding and the
// write here) and written as
// session_dir.h's SessionFileName(id), through a temporary file and a
// rename. The file of a session it wrote that the engine no longer holds
// (released, expired, evicted) is removed, so that a restart does not bring
// it back. A session changed after its last checkpoint comes back as of that
// checkpoint (fewer tokens than its client holds: docs/model_service.md says
// what the client does). An export counts as a use of the session (its idle
// time and LRU place start again); a session spilled meanwhile
// (--kv_spill_dir) is left there (ExportSession's restore = false).
//
// Threads: one of its own; Stop (or the destructor) joins it, after a last
// pass that removes the files of the sessions gone. Errors are warnings on
// stderr (the session is tried again at the next pass).
#ifndef LLM_MODEL_SVC_SERVER_SESSION_CHECKPOINT_H_
#define LLM_MODEL_SVC_SERVER_SESSION_CHECKPOINT_H_

#include <cstdint>
#include <string>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "model_svc/engine/engine.h"

namespace llm {

class SessionCheckpointer {
 public:
  // `saved(n)` is told of each pass's n sessions written (metrics). The
  // engine must outlive the checkpointer (or its Stop).
  SessionCheckpointer(engine::Engine* engine, std::string dir, absl::Duration period,
                      absl::AnyInvocable<void(int64_t)> saved);
  ~SessionCheckpointer() { Stop(); }

  void Stop();

 private:
  // A session's state as the checkpoint saw it: its tokens, and the tokens
  // ever appended to it.
  using Version = std::pair<int64_t, int64_t>;
  void Loop();
  // Writes what changed (when `save`), removes the files of sessions gone.
  void Pass(bool save);

  engine::Engine* const engine_;
  const std::string dir_;
  const absl::Duration period_;
  absl::AnyInvocable<void(int64_t)> saved_;
  absl::flat_hash_map<std::string, Version> written_;  // the loop's
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace llm

#endif  // LLM_MODEL_SVC_SERVER_SESSION_CHECKPOINT_H_
