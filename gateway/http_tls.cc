#include "gateway/http_tls.h"

#include <dlfcn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <unistd.h>

#include <cstdio>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <string>

#include "common/strings.h"

namespace llm::gateway {
namespace {

// The OpenSSL errors queued on this thread (cleared), or `fallback`.
std::string OpenSslErrors(const char* fallback) {
  std::string out;
  while (const unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out.empty() ? std::string(fallback) : out;
}

absl::Status Readable(const std::string& path, const char* flag) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return absl::NotFoundError(StrCat(flag, ": cannot read ", path));
  std::fclose(f);
  return absl::OkStatus();
}

// A key that needs a passphrase fails instead of prompting on the terminal.
int NoPassphrase(char*, int, int, void*) { return 0; }

std::string ExecutableDir() {
  char path[4096];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) return ".";
  const std::string p(path, static_cast<size_t>(n));
  const size_t slash = p.rfind('/');
  return slash == std::string::npos ? "." : p.substr(0, slash);
}

// dlopen(name) resolves to an object that has every one of `functions`.
absl::Status Check(const char* name, std::initializer_list<const char*> functions) {
  void* handle = dlopen(name, RTLD_LAZY | RTLD_NOLOAD);
  if (handle == nullptr) return absl::FailedPreconditionError(StrCat(name, " is not loaded"));
  absl::Status status;
  for (const char* f : functions) {
    if (dlsym(handle, f) == nullptr) {
      status = absl::FailedPreconditionError(StrCat(name, " lacks ", f));
      break;
    }
  }
  dlclose(handle);
  return status;
}

absl::Status Prepare(const std::string& dir) {
  for (const char* shim : {kCivetwebCryptoShim, kCivetwebSslShim}) {
    const std::string path = StrCat(dir, "/", shim);
    if (dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL) == nullptr) {  // never closed
      return absl::FailedPreconditionError(StrCat(
          "HTTPS needs ", path, " (built with llm_gateway, installed beside it): ", dlerror()));
    }
  }
  // A few of what civetweb looks up, the one OpenSSL 3 lacks first.
  if (absl::Status s = Check("libssl.so", {"SSL_get_peer_certificate", "SSL_CTX_new",
                                           "OPENSSL_init_ssl", "SSL_accept", "SSL_read"});
      !s.ok()) {
    return s;
  }
  return Check("libcrypto.so", {"ERR_get_error", "X509_free", "CRYPTO_free"});
}

}  // namespace

absl::Status PrepareCivetwebOpenSsl(const std::string& dir) {
  static std::mutex mu;
  static bool prepared = false;
  std::lock_guard<std::mutex> lock(mu);
  if (prepared) return absl::OkStatus();
  absl::Status s = Prepare(dir.empty() ? ExecutableDir() : dir);
  prepared = s.ok();
  return s;
}

absl::Status CheckHttpTls(const HttpTlsFiles& files) {
  if (!files.enabled()) return absl::OkStatus();
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx(SSL_CTX_new(TLS_server_method()),
                                                        &SSL_CTX_free);
  if (ctx == nullptr) return absl::InternalError(OpenSslErrors("SSL_CTX_new failed"));
  return LoadHttpTls(ctx.get(), files);
}

absl::Status LoadHttpTls(void* ssl_ctx, const HttpTlsFiles& files) {
  if (files.cert.empty() || files.key.empty()) {
    return absl::InvalidArgumentError("--http_tls_cert and --http_tls_key go together");
  }
  if (absl::Status s = Readable(files.cert, "--http_tls_cert"); !s.ok()) return s;
  if (absl::Status s = Readable(files.key, "--http_tls_key"); !s.ok()) return s;
  auto* ctx = static_cast<SSL_CTX*>(ssl_ctx);
  ERR_clear_error();
  if (SSL_CTX_use_certificate_chain_file(ctx, files.cert.c_str()) != 1) {
    return absl::InvalidArgumentError(
        StrCat("--http_tls_cert ", files.cert,
               ": not a PEM certificate chain: ", OpenSslErrors("no certificate")));
  }
  std::FILE* f = std::fopen(files.key.c_str(), "rb");
  if (f == nullptr) return absl::NotFoundError(StrCat("--http_tls_key: cannot read ", files.key));
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(
      PEM_read_PrivateKey(f, nullptr, &NoPassphrase, nullptr), &EVP_PKEY_free);
  std::fclose(f);
  if (key == nullptr) {
    return absl::InvalidArgumentError(
        StrCat("--http_tls_key ", files.key,
               ": not an unencrypted PEM private key: ", OpenSslErrors("no key")));
  }
  if (SSL_CTX_use_PrivateKey(ctx, key.get()) != 1 || SSL_CTX_check_private_key(ctx) != 1) {
    return absl::InvalidArgumentError(StrCat("--http_tls_key ", files.key,
                                             " is not the key of the certificate in ", files.cert,
                                             ": ", OpenSslErrors("mismatch")));
  }
  return absl::OkStatus();
}

}  // namespace llm::gateway
