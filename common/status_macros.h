// Status helpers shared by every component.
//
//   LLM_RETURN_IF_ERROR(expr);          // returns expr's status if not ok
//   LLM_ASSIGN_OR_RETURN(auto x, expr); // unwraps a StatusOr or returns its status
#ifndef LLM_COMMON_STATUS_MACROS_H_
#define LLM_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define LLM_STATUS_CONCAT_INNER_(a, b) a##b
#define LLM_STATUS_CONCAT_(a, b) LLM_STATUS_CONCAT_INNER_(a, b)

#define LLM_RETURN_IF_ERROR(expr)              \
  do {                                         \
    ::absl::Status llm_status_ = (expr);       \
    if (!llm_status_.ok()) return llm_status_; \
  } while (0)

#define LLM_ASSIGN_OR_RETURN(lhs, expr) \
  LLM_ASSIGN_OR_RETURN_IMPL_(LLM_STATUS_CONCAT_(llm_statusor_, __LINE__), lhs, expr)

#define LLM_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr)    \
  auto statusor = (expr);                                  \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = std::move(statusor).value()

#endif  // LLM_COMMON_STATUS_MACROS_H_
