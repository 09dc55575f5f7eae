// model_server --session_dir: the live sessions kept across a restart.
//
// SaveSessions writes every session of the engine to DIR as a snapshot
// (snapshot/snapshot.h) named SessionFileName(id), each written to a hidden
// temporary file in DIR and renamed over the name (a reader never sees half
// a file). RestoreSessions imports every such file under its session id
// (Engine::ImportSession's session_id), so that clients go on with the ids
// they hold, and removes each file it imported (a later crash must not bring
// back an older state of a session that was used since). Files it cannot
// import (another model, corrupt, no room, an id in use) are left in place,
// skipped with a warning on stderr, and counted. It removes the temporary
// files a save cut short left.
//
// Sessions are saved on drain only (SIGTERM/SIGINT): a process killed
// otherwise (SIGKILL, a crash, the OOM killer) saves nothing.
//
// Threads: call with no gRPC call in flight on the engine (the server calls
// Save after its gRPC server has stopped, Restore before it turns SERVING);
// a session busy in the engine is skipped. Cost: each session's KV is
// copied, encoded (zstd level 1) and written, one at a time; one snapshot in
// memory at once. Errors never abort the whole: a DIR that cannot be read or
// created is a warning, every session counted as skipped.
#ifndef LLM_MODEL_SVC_SERVER_SESSION_DIR_H_
#define LLM_MODEL_SVC_SERVER_SESSION_DIR_H_

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "model_svc/engine/engine.h"

namespace llm {

// Snapshot files end with this.
inline constexpr std::string_view kSessionFileSuffix = ".kvsnap";

struct SessionDirCounts {
  int64_t saved = 0;     // SaveSessions: files written
  int64_t restored = 0;  // RestoreSessions: sessions imported
  int64_t skipped = 0;   // sessions or files that failed (each with a warning)
};

// OK when `value` (what the error calls `what`) holds only the characters
// of a session id: letters, digits, '-', '_' and '.' (ids travel in proto
// strings, log lines and, here, file names).
absl::Status CheckSessionIdChars(std::string_view what, std::string_view value);

// The file name of session `id`: the id and kSessionFileSuffix.
// INVALID_ARGUMENT unless the id is 1 to 200 letters, digits, '-', '_' and
// '.', not starting with '.' (so that the name stays inside the directory
// and apart from the hidden temporary files).
absl::StatusOr<std::string> SessionFileName(std::string_view id);

// The session id that file name `name` holds: the inverse of
// SessionFileName; INVALID_ARGUMENT for a name SessionFileName never makes.
absl::StatusOr<std::string> SessionIdOfFile(std::string_view name);

// Writes `bytes` to the file `name` of `dir` (which exists): to a hidden
// temporary file first, flushed to the disk, then renamed over the name (a
// reader never sees half a file); the temporary file removed on failure
// (UNAVAILABLE naming what failed).
absl::Status WriteSessionFile(const std::string& dir, const std::string& name,
                              const std::string& bytes);
// Writes `bytes` to `path` and flushes them to the disk (UNAVAILABLE).
absl::Status WriteFileSynced(const std::string& path, const std::string& bytes);
// The file at `path`, at most `max_bytes` (INVALID_ARGUMENT beyond;
// UNAVAILABLE when it cannot be read).
absl::StatusOr<std::string> ReadFileBounded(const std::filesystem::path& path, int64_t max_bytes);
// The session files (*kSessionFileSuffix, not hidden) of `dir`, none when it
// is missing; removes the temporary files a write cut short left.
// UNAVAILABLE when it cannot be listed.
absl::StatusOr<std::vector<std::filesystem::path>> ListSessionFiles(const std::string& dir);

// Writes every session of `engine` to `dir` (created if missing).
SessionDirCounts SaveSessions(engine::Engine& engine, const std::string& dir);

// Imports every snapshot file in `dir` (a missing dir holds none).
SessionDirCounts RestoreSessions(engine::Engine& engine, const std::string& dir);

}  // namespace llm

#endif  // LLM_MODEL_SVC_SERVER_SESSION_DIR_H_
