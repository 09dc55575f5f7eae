// TLS, mutual TLS and bearer tokens, the same way in every server and client.
//
// Servers: MakeServerCredentials() from PEM files (--tls_cert, --tls_key and,
// for mutual TLS, --tls_ca: client certificates are then required and
// verified against it); BearerAuth checks the `authorization: Bearer <token>`
// metadata of a call (--auth_token_file). Health (grpc.health.v1) and
// reflection are gRPC's own services and are never checked.
// Clients: MakeChannelCredentials() (--tls_ca to verify the server, --tls_cert
// and --tls_key to present a client certificate) and CreateAuthChannel(),
// whose interceptor adds the token to every call (over TLS or plaintext).
#ifndef LLM_COMMON_GRPC_SECURITY_H_
#define LLM_COMMON_GRPC_SECURITY_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace llm {

// PEM file paths; empty: not given.
struct TlsFiles {
  std::string cert;  // certificate chain
  std::string key;   // its private key
  std::string ca;    // CA bundle: server side, verify clients; client side, verify the server
};

// Insecure when no file is given; TLS with cert and key; mutual TLS with ca
// too. INVALID_ARGUMENT for cert without key (or the reverse) or ca without
// cert; NOT_FOUND for an unreadable file.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsFiles& files);

// Insecure when no file is given; otherwise TLS, verifying the server with ca
// (or the system roots without it) and presenting cert and key if given.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const TlsFiles& files);

// The token in `path` (surrounding whitespace removed); "" for an empty path.
// INVALID_ARGUMENT if the file holds no token, NOT_FOUND if it is unreadable.
absl::StatusOr<std::string> ReadTokenFile(const std::string& path);

// A channel whose calls carry `authorization: Bearer <token>` (none if the
// token is empty).
std::shared_ptr<grpc::Channel> CreateAuthChannel(
    const std::string& address, const std::shared_ptr<grpc::ChannelCredentials>& creds,
    const grpc::ChannelArguments& args, const std::string& token);

// Server-side check of the bearer token. Threads: immutable.
class BearerAuth {
 public:
  explicit BearerAuth(std::string token) : expected_("Bearer " + std::move(token)) {}
  // OK, or UNAUTHENTICATED when the metadata is missing or wrong.
  grpc::Status Check(const grpc::ServerContextBase& context) const;

 private:
  const std::string expected_;
};

// OK without `auth`; else auth->Check(context).
inline grpc::Status CheckAuth(const BearerAuth* auth, const grpc::ServerContextBase& context) {
  return auth == nullptr ? grpc::Status::OK : auth->Check(context);
}

}  // namespace llm

#endif  // LLM_COMMON_GRPC_SECURITY_H_
