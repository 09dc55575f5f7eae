// grpc.health.v1 checks from the client (`llm health`, scripts), through a
// generic stub and a few bytes of protobuf wire format: Debian ships no
// generated code for the health service.
#ifndef LLM_CLIENT_HEALTH_H_
#define LLM_CLIENT_HEALTH_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace llm::client {

enum class ServingStatus { kUnknown = 0, kServing = 1, kNotServing = 2, kServiceUnknown = 3 };

// Health/Check of `service` ("" = the whole server). Errors: the call's
// status (UNAVAILABLE when nothing listens at the address).
absl::StatusOr<ServingStatus> CheckHealth(const std::shared_ptr<grpc::Channel>& channel,
                                          const std::string& service, absl::Duration timeout);

// Polls CheckHealth every 100 ms until SERVING or `timeout`; the error says
// what the last check saw.
// `channel`: a channel to `address` (e.g. with TLS); null: a plaintext one.
absl::Status WaitUntilServing(const std::string& address, absl::Duration timeout,
                              std::shared_ptr<grpc::Channel> channel = nullptr);

}  // namespace llm::client

#endif  // LLM_CLIENT_HEALTH_H_
