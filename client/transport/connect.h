// Channels to the services, and the wait for a service that is still loading,
// shared by the tokenizer and model clients.
//
// Threads: free functions, thread-safe. Cost: WaitReady calls `attempt`
// every 200 ms for up to ClientOptions::ready_timeout.
#ifndef LLM_CLIENT_TRANSPORT_CONNECT_H_
#define LLM_CLIENT_TRANSPORT_CONNECT_H_

#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "client/transport/client_options.h"

namespace llm::client::internal {

// A channel to `address` with the options' TLS name and bearer token, and
// fast reconnects. `server_name`: the name to verify a TLS certificate
// against when options.tls_server_name is empty ("": the address's host).
std::shared_ptr<grpc::Channel> NewChannel(const std::string& address,
                                          const std::shared_ptr<grpc::ChannelCredentials>& creds,
                                          const ClientOptions& options,
                                          const std::string& server_name = "");

// Retries `attempt()` every 200 ms while `loading()` says the service is up
// but still loading and options.ready_timeout has not run out, reporting to
// options.on_wait. Returns the last
// attempt's status, or DEADLINE_EXCEEDED
// ("the model service at ADDR is still loading after 2m") with
// *still_loading set when the time ran out. `name`: "tokenizer" or "model".
absl::Status WaitReady(const ClientOptions& options, std::string_view name,
                       const std::string& address, const std::function<absl::Status()>& attempt,
                       const std::function<bool()>& loading, bool* still_loading);

// `s` with "what: " before its message (OK stays OK).
absl::Status WithContext(const absl::Status& s, std::string_view what);

}  // namespace llm::client::internal

#endif  // LLM_CLIENT_TRANSPORT_CONNECT_H_
