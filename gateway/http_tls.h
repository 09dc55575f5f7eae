// HTTPS on the gateway's own port (--http_tls_cert, --http_tls_key; the
// gateway's --tls_* flags are those of its connections to the services).
//
// civetweb serves the TLS, with the OpenSSL it loads at run time: it dlopens
// "libssl.so" and "libcrypto.so" and looks its functions up by name. Debian
// 12's civetweb 1.15 was written for OpenSSL 1.1: on OpenSSL 3 one of them,
// SSL_get_peer_certificate, is missing, and civetweb calls a null pointer
// after every TLS handshake (a crash). So PrepareCivetwebOpenSsl first loads
// two small objects from beside the binary (civetweb_openssl_shim.cc) that
// civetweb then finds under those names, and that supply the missing
// function; no libssl-dev is needed at run time.
//
// civetweb itself reads cert and key from one file; the gateway takes them
// apart, as the services' --tls_cert / --tls_key do, and loads them into
// civetweb's SSL_CTX from its init_ssl callback (LoadHttpTls).
#ifndef LLM_GATEWAY_HTTP_TLS_H_
#define LLM_GATEWAY_HTTP_TLS_H_

#include <string>

#include "absl/status/status.h"

namespace llm::gateway {

// PEM file paths; both empty: plain HTTP.
struct HttpTlsFiles {
  std::string cert;  // the certificate chain, leaf first
  std::string key;   // its private key (unencrypted)
  bool enabled() const { return !cert.empty() || !key.empty(); }
};

// OK when neither file is given, or both are and load: InvalidArgument for
// one without the other, a file that holds no usable PEM (or an encrypted
// key), or a key that does not match the certificate; NotFound for a file
// that cannot be read. The flags' check at startup, before anything else.
absl::Status CheckHttpTls(const HttpTlsFiles& files);

// Loads the chain and key of `files` (enabled) into `ssl_ctx`, an SSL_CTX*;
// the same errors as CheckHttpTls. Threads: `ssl_ctx` must not be in use.
absl::Status LoadHttpTls(void* ssl_ctx, const HttpTlsFiles& files);

// The shared objects PrepareCivetwebOpenSsl loads, beside the executable
// (or in `dir`, when not empty).
inline constexpr char kCivetwebSslShim[] = "libllm_civetweb_ssl.so";
inline constexpr char kCivetwebCryptoShim[] = "libllm_civetweb_crypto.so";

// Loads both shims (they stay loaded; after a success, later calls do
// nothing) and checks that dlopen of "libssl.so" and "libcrypto.so" now
// yields them, with functions civetweb needs. FailedPrecondition, naming the
// file, when one is missing. Call before civetweb starts TLS. Threads: safe.
absl::Status PrepareCivetwebOpenSsl(const std::string& dir = "");

}  // namespace llm::gateway

#endif  // LLM_GATEWAY_HTTP_TLS_H_
