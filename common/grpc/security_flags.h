// The client TLS and token flags (--tls_ca, --tls_cert, --tls_key,
// --tls_server_name, --auth_token_file), shared by every llm subcommand that
// talks to a server and by llm_gateway (its channels to the services).
#ifndef LLM_COMMON_GRPC_SECURITY_FLAGS_H_
#define LLM_COMMON_GRPC_SECURITY_FLAGS_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/grpc/security.h"

namespace llm::client {

struct SecurityFlags {
  TlsFiles tls;
  std::string server_name;  // --tls_server_name
  std::string token;        // read from --auth_token_file
};

// The flags' values (the token file read); errors name the flag.
absl::StatusOr<SecurityFlags> SecurityFromFlags();

// A channel to `address` with the flags' TLS and token. `server_name`, when
// given and --tls_server_name is not, is the name TLS verifies (a replica
// resolved from a DNS name, reached by its IP address).
absl::StatusOr<std::shared_ptr<grpc::Channel>> ChannelFromFlags(
    const std::string& address, const std::string& server_name = "");

}  // namespace llm::client

#endif  // LLM_COMMON_GRPC_SECURITY_FLAGS_H_
