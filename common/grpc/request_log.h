// Structured request logs: one key=value line per call on stderr, e.g.
//   ts=2026-11-29T23:30:00.123Z level=info service=model method=Prefill
//   session=replica-0.3 tokens=5 duration_ms=12.345 status=OK
// (one line; `msg="..."` added for errors). OK calls are logged at info,
// INTERNAL / UNKNOWN / DATA_LOSS at error, other failures at warning; the
// process-wide level (--log_level) drops what is below it.
//
// Threads: SetLogLevel() once at start-up; the rest from any thread.
#ifndef LLM_COMMON_GRPC_REQUEST_LOG_H_
#define LLM_COMMON_GRPC_REQUEST_LOG_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace llm {

enum class LogLevel { kError = 0, kWarning = 1, kInfo = 2, kDebug = 3 };

// "error", "warning", "info" or "debug"; INVALID_ARGUMENT otherwise.
absl::StatusOr<LogLevel> ParseLogLevel(const std::string& name);
void SetLogLevel(LogLevel level);
bool LogEnabled(LogLevel level);

// One call's log line; written by Finish() (once).
class RequestLog {
 public:
  RequestLog(const char* service, const char* method)
      : service_(service), method_(method), start_(absl::Now()) {}
  RequestLog(const char* service, const char* method, absl::Time start)
      : service_(service), method_(method), start_(start) {}

  // The session id as the client sent it; the line shows at most its first
  // kMaxLoggedBytes bytes (the rest is counted, not written).
  void set_session(std::string_view session);
  void add_tokens(int64_t n) { tokens_ += n; }

  // Longest session id and status message written whole.
  static constexpr size_t kMaxLoggedBytes = 256;

  // Writes the line with `status` and the time since construction.
  void Finish(const absl::Status& status);

 private:
  const char* service_;
  const char* method_;
  absl::Time start_;
  std::string session_;
  int64_t tokens_ = 0;
  bool finished_ = false;
};

}  // namespace llm

#endif  // LLM_COMMON_GRPC_REQUEST_LOG_H_
