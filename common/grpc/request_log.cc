#include "common/grpc/request_log.h"

#include <atomic>
#include <cstdio>

#include "common/strings.h"

namespace llm {
namespace {

std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kError:
      return "error";
    case LogLevel::kWarning:
      return "warning";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kDebug:
      return "debug";
  }
  return "info";
}

// A value as is when it is a plain word, else double-quoted with escapes.
std::string Quote(const std::string& v) {
  bool plain = !v.empty();
  for (char c : v) {
    if (c <= ' ' || c == '"' || c == '=' || c == '\\' || static_cast<unsigned char>(c) >= 0x7F) {
      plain = false;
    }
  }
  if (plain) return v;
  std::string out = "\"";
  for (char c : v) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (static_cast<unsigned char>(c) < ' ') {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace

absl::StatusOr<LogLevel> ParseLogLevel(const std::string& name) {
  if (name == "error") return LogLevel::kError;
  if (name == "warning" || name == "warn") return LogLevel::kWarning;
  if (name == "info") return LogLevel::kInfo;
  if (name == "debug") return LogLevel::kDebug;
  return absl::InvalidArgumentError(
      StrCat("--log_level must be error, warning, info or debug, not '", name, "'"));
}

void SetLogLevel(LogLevel level) { g_level.store(static_cast<int>(level)); }

bool LogEnabled(LogLevel level) { return static_cast<int>(level) <= g_level.load(); }

void RequestLog::set_session(std::string_view session) {
  session_ = Clip(session, kMaxLoggedBytes);
}

void RequestLog::Finish(const absl::Status& status) {
  if (finished_) return;
  finished_ = true;
  LogLevel level = LogLevel::kInfo;
  switch (status.code()) {
    case absl::StatusCode::kOk:
      break;
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kUnknown:
    case absl::StatusCode::kDataLoss:
      level = LogLevel::kError;
      break;
    default:
      level = LogLevel::kWarning;
      break;
  }
  if (!LogEnabled(level)) return;
  const absl::Time now = absl::Now();
  std::string line =
      StrCat("ts=", absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", now, absl::UTCTimeZone()),
             " level=", LevelName(level), " service=", service_, " method=", method_);
  if (!session_.empty()) line += StrCat(" session=", Quote(session_));
  line += StrCat(" tokens=", tokens_);
  char ms[32];
  std::snprintf(ms, sizeof(ms), "%.3f", absl::ToDoubleMilliseconds(now - start_));
  line += StrCat(" duration_ms=", ms, " status=", absl::StatusCodeToString(status.code()));
  if (!status.ok()) {
    line += StrCat(" msg=",
                   Quote(Clip(std::string_view(status.message().data(), status.message().size()),
                              kMaxLoggedBytes)));
  }
  line += '\n';
  std::fwrite(line.data(), 1, line.size(), stderr);  // one write: lines do not interleave
}

}  // namespace llm
