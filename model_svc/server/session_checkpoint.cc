#include "model_svc/server/session_checkpoint.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <system_error>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "common/strings.h"
#include "model_svc/server/session_dir.h"

namespace llm {

SessionCheckpointer::SessionCheckpointer(engine::Engine* engine, std::string dir,
                                         absl::Duration period,
                                         absl::AnyInvocable<void(int64_t)> saved)
    : engine_(engine), dir_(std::move(dir)), period_(period), saved_(std::move(saved)) {
  thread_ = std::thread([this] { Loop(); });
}

void SessionCheckpointer::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stop_) return;
    stop_ = true;
  }
  thread_.join();
  Pass(/*save=*/false);
}

void SessionCheckpointer::Loop() {
  const absl::Duration every = std::min(period_ / 2, absl::Seconds(1));
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_; };
      if (mu_.AwaitWithTimeout(absl::Condition(&stopping), every)) return;
    }
    Pass(/*save=*/true);
  }
}

void SessionCheckpointer::Pass(bool save) {
  absl::flat_hash_set<std::string> live;
  int64_t written = 0;
  bool dir_made = false;
  for (const engine::SessionInfo& s : engine_->ListSessions()) {
    live.insert(s.id);
    const Version now{s.num_tokens, s.prefilled_tokens + s.decoded_tokens};
    auto it = written_.find(s.id);
    if (!save || s.busy || s.idle < period_ || (it != written_.end() && it->second == now)) {
      continue;
    }
    absl::StatusOr<std::string> name = SessionFileName(s.id);
    absl::StatusOr<std::string> bytes =
        name.ok() ? engine_->ExportSession(s.id, /*compress=*/true, /*restore=*/false)
                  : absl::StatusOr<std::string>(name.status());
    absl::Status st = bytes.status();
    if (st.ok() && !dir_made) {
      std::error_code ec;
      std::filesystem::create_directories(dir_, ec);
      dir_made = !ec;
    }
    if (st.ok()) st = WriteSessionFile(dir_, *name, *bytes);
    if (!st.ok()) {
      // Busy or gone meanwhile: tried again at the next pass.
      if (!absl::IsAborted(st) && !absl::IsNotFound(st)) {
        std::fprintf(stderr, "model_server: --session_checkpoint_seconds: session %s: %s\n",
                     s.id.c_str(), st.ToString().c_str());
      }
      continue;
    }
    written_[s.id] = now;
    ++written;
  }
  for (auto it = written_.begin(); it != written_.end();) {
    if (live.contains(it->first)) {
      ++it;
      continue;
    }
    std::error_code ec;
    std::filesystem::remove(StrCat(dir_, "/", it->first, kSessionFileSuffix), ec);
    written_.erase(it++);
  }
  if (written > 0 && saved_) saved_(written);
}

}  // namespace llm
