#include "common/grpc/security.h"

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/support/client_interceptor.h>

#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/strings.h"

namespace llm {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(StrCat("cannot read ", path));
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// Adds the authorization metadata to every call of the channel.
class AuthInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit AuthInterceptor(const std::string* header) : header_(header) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->insert({"authorization", *header_});
    }
    methods->Proceed();
  }

 private:
  const std::string* header_;
};

class AuthInterceptorFactory final : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit AuthInterceptorFactory(std::string token) : header_("Bearer " + std::move(token)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo*) override {
    return new AuthInterceptor(&header_);
  }

 private:
  const std::string header_;  // lives as long as the channel (which owns the factory)
};

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsFiles& files) {
  if (files.cert.empty() && files.key.empty() && files.ca.empty()) {
    return grpc::InsecureServerCredentials();
  }
  if (files.cert.empty() || files.key.empty()) {
    return absl::InvalidArgumentError(
        "--tls_cert and --tls_key go together (and --tls_ca needs them)");
  }
  absl::StatusOr<std::string> cert = ReadFile(files.cert);
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadFile(files.key);
  if (!key.ok()) return key.status();
  grpc::SslServerCredentialsOptions options(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  if (!files.ca.empty()) {
    absl::StatusOr<std::string> ca = ReadFile(files.ca);
    if (!ca.ok()) return ca.status();
    options.pem_root_certs = *ca;
    options.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  options.pem_key_cert_pairs.push_back({*key, *cert});
  return grpc::SslServerCredentials(options);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const TlsFiles& files) {
  if (files.cert.empty() && files.key.empty() && files.ca.empty()) {
    return grpc::InsecureChannelCredentials();
  }
  if (files.cert.empty() != files.key.empty()) {
    return absl::InvalidArgumentError("--tls_cert and --tls_key go together");
  }
  grpc::SslCredentialsOptions options;
  if (!files.ca.empty()) {
    absl::StatusOr<std::string> ca = ReadFile(files.ca);
    if (!ca.ok()) return ca.status();
    options.pem_root_certs = *ca;
  }
  if (!files.cert.empty()) {
    absl::StatusOr<std::string> cert = ReadFile(files.cert);
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadFile(files.key);
    if (!key.ok()) return key.status();
    options.pem_cert_chain = *cert;
    options.pem_private_key = *key;
  }
  return grpc::SslCredentials(options);
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  if (path.empty()) return std::string();
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  const size_t begin = text->find_first_not_of(" \t\r\n");
  if (begin == std::string::npos)
    return absl::InvalidArgumentError(StrCat(path, " holds no token"));
  const size_t end = text->find_last_not_of(" \t\r\n");
  return text->substr(begin, end - begin + 1);
}

std::shared_ptr<grpc::Channel> CreateAuthChannel(
    const std::string& address, const std::shared_ptr<grpc::ChannelCredentials>& creds,
    const grpc::ChannelArguments& args, const std::string& token) {
  if (token.empty()) return grpc::CreateCustomChannel(address, creds, args);
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> factories;
  factories.push_back(std::make_unique<AuthInterceptorFactory>(token));
  return grpc::experimental::CreateCustomChannelWithInterceptors(address, creds, args,
                                                                 std::move(factories));
}

grpc::Status BearerAuth::Check(const grpc::ServerContextBase& context) const {
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find("authorization");
  if (it == metadata.end()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "missing authorization metadata (Bearer token)");
  }
  const grpc::string_ref got = it->second;
  // Constant time in the token's length.
  unsigned diff = got.size() == expected_.size() ? 0 : 1;
  for (size_t i = 0; i < expected_.size(); ++i) {
    diff |= static_cast<unsigned>(static_cast<unsigned char>(i < got.size() ? got.data()[i] : 0) ^
                                  static_cast<unsigned char>(expected_[i]));
  }
  if (diff != 0) return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "wrong bearer token");
  return grpc::Status::OK;
}

}  // namespace llm
