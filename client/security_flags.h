// The llm command's TLS and token flags (--tls_ca, --tls_cert, --tls_key,
// --tls_server_name, --auth_token_file), shared by every subcommand that
// talks to a server.
#ifndef LLM_CLIENT_SECURITY_FLAGS_H_
#define LLM_CLIENT_SECURITY_FLAGS_H_

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

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

// A channel to `address` with the flags' TLS and token.
absl::StatusOr<std::shared_ptr<grpc::Channel>> ChannelFromFlags(const std::string& address);

}  // namespace llm::client

#endif  // LLM_CLIENT_SECURITY_FLAGS_H_
