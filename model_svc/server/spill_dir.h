// model_server --kv_spill_dir: the engine's spill store (engine/
// spill_store.h) as snapshot files in a directory, so that a session
// evicted for memory comes back on its next use instead of being rebuilt.
//
// Spill queues the session's snapshot (raw, as the engine copied it) for a
// writer thread, which encodes it (zstd level 1 when it pays) and writes it
// as SessionFileName(id) (session_dir.h: the same names, the same temporary
// file and rename, so that a reader never sees half a file). Take hands a
// session back (from the queue, or read from its file, which is then
// removed: the live session is the truth). The files are kept within
// `quota_bytes`: past it the least recently spilled are removed (counted as
// dropped); a snapshot larger than the quota, a quota of 0 or a queue past
// kMaxQueuedBytes drops the session at once. A write that fails (a full
// disk, a directory that cannot be written) drops it too (counted as
// failed); the caller of the session's next call then gets NOT_FOUND, as
// without a spill directory. Never an error for the engine.
//
// At start the files already in the directory (left by an earlier process
// of this replica) are taken in, oldest first, so that a restarted replica
// still restores them under their ids; temporary files left by a write cut
// short are removed.
//
// Threads: every method is thread-safe; Spill never blocks on the disk.
// Take and Forget wait for the session's file while the writer writes it.
// Cost: the queue holds raw snapshots (the KV bytes) until written; a file
// costs its encoding (zstd level 1: 0.93 of the raw f16 KV, kept raw when
// that saves less than a sixteenth) and a write with fsync.
#ifndef LLM_MODEL_SVC_SERVER_SPILL_DIR_H_
#define LLM_MODEL_SVC_SERVER_SPILL_DIR_H_

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "model_svc/engine/spill_store.h"

namespace llm {

class SpillDir final : public engine::SpillStore {
 public:
  // Raw snapshots waiting for the writer, at most (beyond: dropped).
  static constexpr int64_t kMaxQueuedBytes = int64_t{1} << 30;

  // Creates `dir` if missing (a warning on stderr when it cannot: every
  // spill then fails, counted) and takes in its files.
  SpillDir(std::string dir, int64_t quota_bytes);
  // Writes what is queued, then stops the writer.
  ~SpillDir() override;

  void Spill(const std::string& id, snapshot::Snapshot s) override;
  absl::StatusOr<std::string> Take(const std::string& id, int64_t max_bytes) override;
  void Restored(const std::string& id, const absl::Status& status) override;
  bool Forget(const std::string& id) override;
  engine::SpillCounts Counts() const override;

  // Waits until nothing is queued or being written (tests).
  void Flush();

 private:
  struct Entry {
    std::optional<snapshot::Snapshot> queued;  // not written yet
    bool writing = false;                      // the writer has it
    bool written = false;                      // its file is in the directory
    int64_t bytes = 0;                         // the file's, once written
    uint64_t serial = 0;                       // the file's, in lru_
  };
  void Write();
  void TakeInFiles();
  // Waits until the writer does not hold session `id`'s entry; its entry
  // then, or null.
  Entry* Settled(const std::string& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes session `id`'s entry (and its file, if written).
  void Remove(const std::string& id, Entry& e, bool remove_file) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes the least recently spilled files past the quota.
  void EnforceQuota() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string PathOf(const std::string& id) const;

  const std::string dir_;
  const int64_t quota_bytes_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, std::string> lru_ ABSL_GUARDED_BY(mu_);  // written files, oldest first
  std::deque<std::string> queue_ ABSL_GUARDED_BY(mu_);        // ids for the writer, in order
  int64_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_serial_ ABSL_GUARDED_BY(mu_) = 0;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  engine::SpillCounts counts_ ABSL_GUARDED_BY(mu_);
  std::thread writer_;
};

}  // namespace llm

#endif  // LLM_MODEL_SVC_SERVER_SPILL_DIR_H_
