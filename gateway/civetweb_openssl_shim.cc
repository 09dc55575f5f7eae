// Two tiny shared objects that let Debian 12's civetweb 1.15 serve HTTPS on
// OpenSSL 3 (http_tls.h says how they are used):
//
//   libllm_civetweb_ssl.so     DT_SONAME "libssl.so", needs libssl.so.3
//   libllm_civetweb_crypto.so  DT_SONAME "libcrypto.so", needs libcrypto.so.3
//
// civetweb dlopens "libssl.so" and "libcrypto.so" and looks every function up
// with dlsym. Once these objects are loaded (the gateway dlopens them by path
// before civetweb starts), those names match their SONAMEs, so civetweb gets
// them, and dlsym finds each function in them or in the OpenSSL 3 libraries
// they need. The one function civetweb 1.15 wants that OpenSSL 3 no longer
// exports, SSL_get_peer_certificate (a macro for SSL_get1_peer_certificate
// since 3.0), is defined here; without it civetweb calls a null pointer after
// every TLS handshake. No unversioned libssl.so (libssl-dev) is needed at run
// time either.
//
// Built twice from this file: LLM_CIVETWEB_SSL_SHIM set for the first.
#if LLM_CIVETWEB_SSL_SHIM
#include <openssl/ssl.h>
#include <openssl/x509.h>

#undef SSL_get_peer_certificate

// OpenSSL 1.1's SSL_get_peer_certificate: the peer's certificate with its
// reference count raised (civetweb frees it), as SSL_get1_peer_certificate.
extern "C" __attribute__((visibility("default"))) X509* SSL_get_peer_certificate(const SSL* ssl) {
  return SSL_get1_peer_certificate(ssl);
}
#endif
