// grpc.health.v1 checks from the client (`llm health`, scripts), through a
// generic stub and a few bytes of protobuf wire format: Debian ships no
// generated code for the health service.
#ifndef LLM_CLIENT_TRANSPORT_HEALTH_H_
#define LLM_CLIENT_TRANSPORT_HEALTH_H_

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

// The two services of this project, and their gRPC names.
enum class Service { kTokenizer, kModel };
inline constexpr char kTokenizerServiceName[] = "llm.v1.Tokenizer";
inline constexpr char kModelServiceName[] = "llm.v1.Model";

// Why a server does not serve `expected` (it answered UNIMPLEMENTED, or its
// health service does not know the name), from the health status of the
// other service: "this address serves the tokenizer, not the model", or
// "this address does not serve llm.v1.Model" when it serves neither.
std::string WrongServiceMessage(const std::shared_ptr<grpc::Channel>& channel, Service expected,
                                absl::Duration timeout);

// Polls CheckHealth of `service` ("": the whole server) every 100 ms until
// SERVING or `timeout`; the error says what the last check saw. A server
// whose health service does not know a named service fails at once with
// NOT_FOUND and WrongServiceMessage.
// `channel`: a channel to `address` (e.g. with TLS); null: a plaintext one.
absl::Status WaitUntilServing(const std::string& address, absl::Duration timeout,
                              std::shared_ptr<grpc::Channel> channel = nullptr,
                              const std::string& service = "");

}  // namespace llm::client

#endif  // LLM_CLIENT_TRANSPORT_HEALTH_H_
