#include "model_svc/server/spill_dir.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/strings.h"
#include "model_svc/server/session_dir.h"

namespace llm {
namespace {

void Warn(const std::string& what, const absl::Status& why) {
  std::fprintf(stderr, "model_server: --kv_spill_dir: %s: %s\n", what.c_str(),
               why.ToString().c_str());
}

}  // namespace

SpillDir::SpillDir(std::string dir, int64_t quota_bytes)
    : dir_(std::move(dir)), quota_bytes_(std::max<int64_t>(quota_bytes, 0)) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) Warn(dir_, absl::UnavailableError(StrCat("cannot create it: ", ec.message())));
  TakeInFiles();
  writer_ = std::thread([this] { Write(); });
}

SpillDir::~SpillDir() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  writer_.join();
}

std::string SpillDir::PathOf(const std::string& id) const {
  return StrCat(dir_, "/", id, kSessionFileSuffix);
}

void SpillDir::TakeInFiles() {
  absl::StatusOr<std::vector<std::filesystem::path>> files = ListSessionFiles(dir_);
  if (!files.ok()) {
    Warn(dir_, files.status());
    return;
  }
  struct Found {
    std::filesystem::file_time_type time;
    std::string id;
    int64_t bytes;
  };
  std::vector<Found> found;
  for (const std::filesystem::path& path : *files) {
    absl::StatusOr<std::string> id = SessionIdOfFile(path.filename().string());
    std::error_code ec;
    const uintmax_t bytes = std::filesystem::file_size(path, ec);
    const auto time = std::filesystem::last_write_time(path, ec);
    if (id.ok() && !ec) found.push_back({time, *id, static_cast<int64_t>(bytes)});
  }
  std::sort(found.begin(), found.end(),
            [](const Found& a, const Found& b) { return a.time < b.time; });
  absl::MutexLock lock(&mu_);
  for (const Found& f : found) {
    Entry& e = entries_[f.id];
    e.written = true;
    e.bytes = f.bytes;
    e.serial = next_serial_++;
    lru_[e.serial] = f.id;
    counts_.bytes += f.bytes;
  }
  EnforceQuota();
}

void SpillDir::Spill(const std::string& id, snapshot::Snapshot s) {
  absl::MutexLock lock(&mu_);
  if (Entry* old = Settled(id); old != nullptr) Remove(id, *old, /*remove_file=*/true);
  const int64_t raw = static_cast<int64_t>(s.kv.size());
  if (quota_bytes_ == 0 || stop_ || queued_bytes_ + raw > kMaxQueuedBytes) {
    ++counts_.dropped;
    return;
  }
  queued_bytes_ += raw;
  entries_[id].queued = std::move(s);
  queue_.push_back(id);
}

// The writer thread: encodes and writes the queued snapshots, in order,
// until stopped with nothing queued.
void SpillDir::Write() {
  for (;;) {
    std::string id;
    snapshot::Snapshot s;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](SpillDir* d)
               ABSL_EXCLUSIVE_LOCKS_REQUIRED(d->mu_) { return d->stop_ || !d->queue_.empty(); },
          this));
      if (queue_.empty()) return;  // stopping
      id = std::move(queue_.front());
      queue_.pop_front();
      auto it = entries_.find(id);
      if (it == entries_.end() || !it->second.queued.has_value()) continue;  // taken meanwhile
      s = *std::move(it->second.queued);
      it->second.queued.reset();
      it->second.writing = true;
      queued_bytes_ -= static_cast<int64_t>(s.kv.size());
      writing_ = true;
    }
    absl::StatusOr<std::string> bytes = snapshot::Encode(s, /*compress=*/true);
    absl::StatusOr<std::string> name = SessionFileName(id);
    absl::Status st = !bytes.ok() ? bytes.status() : name.status();
    const int64_t size = bytes.ok() ? static_cast<int64_t>(bytes->size()) : 0;
    const bool fits = size <= quota_bytes_;
    if (st.ok() && fits) st = WriteSessionFile(dir_, *name, *bytes);
    absl::MutexLock lock(&mu_);
    // The first failure, then every 64th (a full disk fails them all).
    if (!st.ok() && counts_.failed % 64 == 0) {
      Warn(StrCat("session ", id, " not spilled (dropped; ", counts_.failed + 1, " so far)"), st);
    }
    writing_ = false;
    Entry& e = entries_[id];
    e.writing = false;
    if (!st.ok() || !fits) {
      ++(st.ok() ? counts_.dropped : counts_.failed);
      entries_.erase(id);
      continue;
    }
    ++counts_.spilled;
    e.written = true;
    e.bytes = size;
    e.serial = next_serial_++;
    lru_[e.serial] = id;
    counts_.bytes += size;
    EnforceQuota();
  }
}

SpillDir::Entry* SpillDir::Settled(const std::string& id) {
  auto writer_off = [this, &id]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = entries_.find(id);
    return it == entries_.end() || !it->second.writing;
  };
  mu_.Await(absl::Condition(&writer_off));
  auto it = entries_.find(id);
  return it == entries_.end() ? nullptr : &it->second;
}

void SpillDir::Remove(const std::string& id, Entry& e, bool remove_file) {
  if (e.queued.has_value()) queued_bytes_ -= static_cast<int64_t>(e.queued->kv.size());
  if (e.written) {
    lru_.erase(e.serial);
    counts_.bytes -= e.bytes;
    std::error_code ec;
    if (remove_file) std::filesystem::remove(PathOf(id), ec);
  }
  entries_.erase(id);  // a queued id left in queue_ is skipped by the writer
}

void SpillDir::EnforceQuota() {
  while (counts_.bytes > quota_bytes_ && !lru_.empty()) {
    const std::string id = lru_.begin()->second;
    Remove(id, entries_[id], /*remove_file=*/true);
    ++counts_.dropped;
  }
}

absl::StatusOr<std::string> SpillDir::Take(const std::string& id, int64_t max_bytes) {
  std::optional<snapshot::Snapshot> queued;
  {
    absl::MutexLock lock(&mu_);
    Entry* e = Settled(id);
    if (e == nullptr) return absl::NotFoundError(StrCat("no spilled session ", id));
    if (e->queued.has_value()) {
      queued_bytes_ -= static_cast<int64_t>(e->queued->kv.size());
      queued = std::move(e->queued);
      e->queued.reset();
    }
    Remove(id, *e, /*remove_file=*/false);
  }
  // Not written yet: handed back uncompressed (cheaper).
  if (queued.has_value()) return snapshot::Encode(*queued, /*compress=*/false);
  const std::string path = PathOf(id);
  absl::StatusOr<std::string> bytes = ReadFileBounded(path, max_bytes);
  std::error_code ec;
  std::filesystem::remove(path, ec);
  if (!bytes.ok()) {
    Warn(StrCat("session ", id, " not restored (dropped)"), bytes.status());
    absl::MutexLock lock(&mu_);
    ++counts_.failed;
  }
  return bytes;
}

void SpillDir::Restored(const std::string& id, const absl::Status& status) {
  if (!status.ok()) Warn(StrCat("session ", id, " not restored (dropped)"), status);
  absl::MutexLock lock(&mu_);
  ++(status.ok() ? counts_.restored : counts_.failed);
}

bool SpillDir::Forget(const std::string& id) {
  absl::MutexLock lock(&mu_);
  Entry* e = Settled(id);
  if (e == nullptr) return false;
  Remove(id, *e, /*remove_file=*/true);
  return true;
}

engine::SpillCounts SpillDir::Counts() const {
  absl::MutexLock lock(&mu_);
  engine::SpillCounts c = counts_;
  c.sessions = static_cast<int64_t>(entries_.size());
  return c;
}

void SpillDir::Flush() {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return queue_.empty() && !writing_; };
  mu_.Await(absl::Condition(&idle));
}

}  // namespace llm
