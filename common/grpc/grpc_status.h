// The one place where absl::Status becomes grpc::Status and back. Codes map
// one to one (both follow google.rpc.Code); messages are kept.
#ifndef LLM_COMMON_GRPC_GRPC_STATUS_H_
#define LLM_COMMON_GRPC_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace llm {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace llm

#endif  // LLM_COMMON_GRPC_GRPC_STATUS_H_
