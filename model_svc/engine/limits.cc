#include "model_svc/engine/limits.h"

#include <string>

#include "absl/strings/cord.h"

namespace llm::engine {
namespace {

constexpr char kLimitPayload[] = "type.llm/llm.engine.Limit";

}  // namespace

absl::Status WithLimit(absl::Status status, Limit limit) {
  if (!status.ok() && limit != Limit::kNone) {
    status.SetPayload(kLimitPayload, absl::Cord(std::string(1, static_cast<char>(limit))));
  }
  return status;
}

Limit LimitOf(const absl::Status& status) {
  const auto payload = status.GetPayload(kLimitPayload);
  if (!payload.has_value() || payload->size() != 1) return Limit::kNone;
  const int value = static_cast<unsigned char>(std::string(*payload)[0]);
  if (value > static_cast<int>(Limit::kContext)) return Limit::kNone;
  return static_cast<Limit>(value);
}

}  // namespace llm::engine
