// Which server limit refused a request: the engine marks the statuses it
// returns for a limit (a payload on the absl::Status), so that the service
// can count them by reason (llm_limit_rejected_total{reason}) without
// reading error messages.
//
// Threads: pure functions.
#ifndef LLM_MODEL_SVC_ENGINE_LIMITS_H_
#define LLM_MODEL_SVC_ENGINE_LIMITS_H_

#include <string_view>

#include "absl/status/status.h"

namespace llm::engine {

enum class Limit {
  kNone,         // not a limit (or an unmarked status)
  kMaxSessions,  // the session limit (--max_sessions): RESOURCE_EXHAUSTED
  kKvCache,      // the KV pool is full or too small: RESOURCE_EXHAUSTED
  kContext,      // the session would grow past its context: OUT_OF_RANGE
};

// `status` marked with `limit` (an OK status stays unmarked).
absl::Status WithLimit(absl::Status status, Limit limit);

// The limit `status` was marked with; kNone if none.
Limit LimitOf(const absl::Status& status);

}  // namespace llm::engine

#endif  // LLM_MODEL_SVC_ENGINE_LIMITS_H_
