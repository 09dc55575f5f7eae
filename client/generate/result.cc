#include "client/generate/result.h"

namespace llm::client {

std::string_view StopReasonName(StopReason reason) {
  switch (reason) {
    case StopReason::kEos:
      return "eos";
    case StopReason::kStopString:
      return "stop";
    case StopReason::kMaxTokens:
      return "length";
    case StopReason::kCancelled:
      return "cancelled";
    case StopReason::kContext:
      return "context";
  }
  return "unknown";
}

double GenerateResult::tokens_per_second() const {
  const double seconds = absl::ToDoubleSeconds(decode_time);
  if (tokens.size() < 2 || seconds <= 0) return 0.0;
  return static_cast<double>(tokens.size() - 1) / seconds;
}

}  // namespace llm::client
