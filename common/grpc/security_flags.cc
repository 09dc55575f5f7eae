#include "common/grpc/security_flags.h"

#include "absl/flags/flag.h"

ABSL_FLAG(std::string, tls_ca, "",
          "PEM CA bundle that signs the servers' certificates: connect with TLS (also with "
          "--tls_cert alone, verifying against the system roots). Empty: plaintext.");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM client certificate, for servers that require mutual TLS (with --tls_key).");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert.");
ABSL_FLAG(std::string, tls_server_name, "",
          "Name to check the servers' certificates against instead of the address's host.");
ABSL_FLAG(std::string, auth_token_file, "",
          "File holding a bearer token, sent as 'authorization: Bearer <token>' on every call.");

namespace llm::client {

absl::StatusOr<SecurityFlags> SecurityFromFlags() {
  SecurityFlags out;
  out.tls = {absl::GetFlag(FLAGS_tls_cert), absl::GetFlag(FLAGS_tls_key),
             absl::GetFlag(FLAGS_tls_ca)};
  out.server_name = absl::GetFlag(FLAGS_tls_server_name);
  absl::StatusOr<std::string> token = ReadTokenFile(absl::GetFlag(FLAGS_auth_token_file));
  if (!token.ok()) return token.status();
  out.token = std::move(*token);
  return out;
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> ChannelFromFlags(const std::string& address,
                                                                const std::string& server_name) {
  absl::StatusOr<SecurityFlags> flags = SecurityFromFlags();
  if (!flags.ok()) return flags.status();
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> creds =
      MakeChannelCredentials(flags->tls);
  if (!creds.ok()) return creds.status();
  grpc::ChannelArguments args;
  if (!flags->server_name.empty()) {
    args.SetSslTargetNameOverride(flags->server_name);
  } else if (!server_name.empty() && !flags->tls.ca.empty()) {
    args.SetSslTargetNameOverride(server_name);
  }
  return CreateAuthChannel(address, *creds, args, flags->token);
}

}  // namespace llm::client
