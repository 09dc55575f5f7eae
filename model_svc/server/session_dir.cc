#include "model_svc/server/session_dir.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <vector>

#include "absl/status/status.h"
#include "common/strings.h"
#include "model_svc/server/snapshot_rpc.h"

namespace llm {
namespace {

constexpr size_t kMaxIdBytes = 200;

void Warn(const std::string& what, const absl::Status& why) {
  std::fprintf(stderr, "model_server: --session_dir: %s: %s\n", what.c_str(),
               why.ToString().c_str());
}

}  // namespace

// Writes `bytes` to `path` and flushes them to the disk.
absl::Status WriteFileSynced(const std::string& path, const std::string& bytes) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return absl::UnavailableError(StrCat("open ", path, ": ", std::strerror(errno)));
  size_t at = 0;
  while (at < bytes.size()) {
    const ssize_t n = write(fd, bytes.data() + at, bytes.size() - at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      close(fd);
      return absl::UnavailableError(StrCat("write ", path, ": ", std::strerror(err)));
    }
    at += static_cast<size_t>(n);
  }
  const bool synced = fsync(fd) == 0;
  const int err = errno;
  close(fd);
  if (!synced) return absl::UnavailableError(StrCat("fsync ", path, ": ", std::strerror(err)));
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadFileBounded(const std::filesystem::path& path, int64_t max_bytes) {
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) return absl::UnavailableError(StrCat("size of ", path.string(), ": ", ec.message()));
  if (size > static_cast<uintmax_t>(max_bytes)) {
    return absl::InvalidArgumentError(StrCat(size, " bytes, more than the largest snapshot of ",
                                             max_bytes, " this replica could have written"));
  }
  std::ifstream in(path, std::ios::binary);
  std::string bytes(static_cast<size_t>(size), '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(size));
  if (!in) return absl::UnavailableError(StrCat("cannot read ", path.string()));
  return bytes;
}

absl::Status WriteSessionFile(const std::string& dir, const std::string& name,
                              const std::string& bytes) {
  const std::string path = StrCat(dir, "/", name);
  const std::string temp = StrCat(dir, "/.", name, ".tmp");
  absl::Status st = WriteFileSynced(temp, bytes);
  std::error_code ec;
  if (st.ok()) {
    std::filesystem::rename(temp, path, ec);
    if (ec) st = absl::UnavailableError(StrCat("rename to ", path, ": ", ec.message()));
  }
  if (!st.ok()) std::filesystem::remove(temp, ec);
  return st;
}

absl::StatusOr<std::vector<std::filesystem::path>> ListSessionFiles(const std::string& dir) {
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec)) return files;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.starts_with(".") && name.ends_with(StrCat(kSessionFileSuffix, ".tmp"))) {
      // Left by a save cut short (the process killed while it wrote).
      std::error_code ignored;
      std::filesystem::remove(it->path(), ignored);
    } else if (name.ends_with(kSessionFileSuffix) && !name.starts_with(".")) {
      files.push_back(it->path());
    }
  }
  if (ec) return absl::UnavailableError(StrCat("cannot list ", dir, ": ", ec.message()));
  return files;
}

absl::Status CheckSessionIdChars(std::string_view what, std::string_view value) {
  for (char c : value) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_' || c == '.';
    if (!ok) {
      return absl::InvalidArgumentError(
          StrCat(what, " \"", value, "\": only letters, digits, '-', '_' and '.' are allowed"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> SessionFileName(std::string_view id) {
  if (id.empty() || id.size() > kMaxIdBytes || id.front() == '.') {
    return absl::InvalidArgumentError(StrCat("session id of ", id.size(),
                                             " bytes: a file name needs 1 to ", kMaxIdBytes,
                                             " bytes, not starting with '.'"));
  }
  if (absl::Status s = CheckSessionIdChars("session id", id); !s.ok()) return s;
  return StrCat(id, kSessionFileSuffix);
}

absl::StatusOr<std::string> SessionIdOfFile(std::string_view name) {
  if (name.size() <= kSessionFileSuffix.size() || !name.ends_with(kSessionFileSuffix)) {
    return absl::InvalidArgumentError(StrCat("not a session file (*", kSessionFileSuffix, ")"));
  }
  const std::string_view id = name.substr(0, name.size() - kSessionFileSuffix.size());
  if (absl::StatusOr<std::string> back = SessionFileName(id); !back.ok()) return back.status();
  return std::string(id);
}

SessionDirCounts SaveSessions(engine::Engine& engine, const std::string& dir) {
  SessionDirCounts counts;
  const std::vector<engine::SessionInfo> sessions = engine.ListSessions();
  if (sessions.empty()) return counts;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    Warn(dir, absl::UnavailableError(StrCat("cannot create it: ", ec.message())));
    counts.skipped = static_cast<int64_t>(sessions.size());
    return counts;
  }
  for (const engine::SessionInfo& s : sessions) {
    absl::StatusOr<std::string> name = SessionFileName(s.id);
    absl::StatusOr<std::string> bytes =
        name.ok() ? engine.ExportSession(s.id) : absl::StatusOr<std::string>(name.status());
    absl::Status st = bytes.status();
    if (st.ok()) st = WriteSessionFile(dir, *name, *bytes);
    if (st.ok()) {
      ++counts.saved;
    } else {
      ++counts.skipped;
      Warn(StrCat("session ", s.id, " not saved"), st);
    }
  }
  return counts;
}

SessionDirCounts RestoreSessions(engine::Engine& engine, const std::string& dir) {
  SessionDirCounts counts;
  absl::StatusOr<std::vector<std::filesystem::path>> files = ListSessionFiles(dir);
  if (!files.ok()) {
    Warn(dir, files.status());
    return counts;
  }
  std::error_code ec;
  const int64_t max_bytes = MaxSnapshotBytes(engine);
  for (const std::filesystem::path& path : *files) {
    absl::StatusOr<std::string> id = SessionIdOfFile(path.filename().string());
    absl::Status st = id.status();
    if (st.ok() && !std::filesystem::is_regular_file(path, ec)) {
      st = absl::InvalidArgumentError("not a regular file");
    }
    absl::StatusOr<std::string> bytes;
    if (st.ok()) {
      bytes = ReadFileBounded(path, max_bytes);
      st = bytes.status();
    }
    if (st.ok()) st = engine.ImportSession(*bytes, *id).status();
    if (st.ok()) {
      ++counts.restored;
      // Gone once imported: the session lives in the engine now.
      std::filesystem::remove(path, ec);
      if (ec) Warn(StrCat("cannot remove ", path.string()), absl::UnavailableError(ec.message()));
    } else {
      ++counts.skipped;
      Warn(StrCat(path.string(), " skipped (left in place)"), st);
    }
  }
  return counts;
}

}  // namespace llm
