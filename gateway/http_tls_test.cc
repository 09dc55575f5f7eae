#include "gateway/http_tls.h"

#include <dlfcn.h>
#include <openssl/ssl.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "common/strings.h"
#include "common/test_paths.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_certificates.h"

namespace llm::gateway {
namespace {

using ::testing::HasSubstr;

class HttpTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(StrCat(::testing::TempDir(), "http_tls_test_", getpid()));
    *error_ = llm::testing::MakeTestCertificates(*dir_);
  }
  static void TearDownTestSuite() {
    std::error_code ignored;
    if (error_->empty()) std::filesystem::remove_all(*dir_, ignored);
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(error_->empty()) << *error_; }
  static std::string P(const std::string& name) { return *dir_ + "/" + name; }

  static std::string* dir_;
  static std::string* error_;
};
std::string* HttpTlsTest::dir_ = nullptr;
std::string* HttpTlsTest::error_ = new std::string;

TEST_F(HttpTlsTest, NoFilesIsPlainHttp) {
  EXPECT_FALSE(HttpTlsFiles{}.enabled());
  EXPECT_TRUE(CheckHttpTls({}).ok());
}

TEST_F(HttpTlsTest, CertificateAndItsKeyLoad) {
  const HttpTlsFiles files{P("server.pem"), P("server.key")};
  EXPECT_TRUE(files.enabled());
  const absl::Status s = CheckHttpTls(files);
  EXPECT_TRUE(s.ok()) << s;
}

TEST_F(HttpTlsTest, OneWithoutTheOtherIsAnError) {
  for (const HttpTlsFiles& files :
       {HttpTlsFiles{P("server.pem"), ""}, HttpTlsFiles{"", P("server.key")}}) {
    const absl::Status s = CheckHttpTls(files);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("go together"));
  }
}

TEST_F(HttpTlsTest, UnreadableFileNamesIt) {
  absl::Status s = CheckHttpTls({P("missing.pem"), P("server.key")});
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("--http_tls_cert"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("missing.pem"));
  s = CheckHttpTls({P("server.pem"), P("missing.key")});
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("--http_tls_key"));
}

TEST_F(HttpTlsTest, BadPemWrongKeyAndEncryptedKeyAreErrors) {
  absl::Status s = CheckHttpTls({P("garbage.pem"), P("server.key")});
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("--http_tls_cert"));
  s = CheckHttpTls({P("server.pem"), P("garbage.pem")});
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("--http_tls_key"));
  s = CheckHttpTls({P("server.pem"), P("other.key")});
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("is not the key of the certificate"));
  // An encrypted key fails at once (no passphrase prompt on the terminal).
  s = CheckHttpTls({P("server.pem"), P("encrypted.key")});
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
}

// The shims beside the binaries (build/bin, as this test) make civetweb's
// dlopen("libssl.so") find OpenSSL 3 with SSL_get_peer_certificate.
TEST(CivetwebOpenSslTest, ShimsSupplyWhatCivetwebLooksUp) {
  const absl::Status missing = PrepareCivetwebOpenSsl("/nonexistent");
  EXPECT_TRUE(absl::IsFailedPrecondition(missing)) << missing;
  EXPECT_THAT(std::string(missing.message()), HasSubstr("/nonexistent/libllm_civetweb_"));
  const absl::Status s = PrepareCivetwebOpenSsl(llm::testing::BinaryDir() + "/bin");
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_TRUE(PrepareCivetwebOpenSsl("/nonexistent").ok()) << "prepared once, stays prepared";
  void* ssl = dlopen("libssl.so", RTLD_LAZY);  // as civetweb opens it
  ASSERT_NE(ssl, nullptr) << dlerror();
  using GetPeer = X509* (*)(const SSL*);
  auto get_peer = reinterpret_cast<GetPeer>(dlsym(ssl, "SSL_get_peer_certificate"));
  ASSERT_NE(get_peer, nullptr);
  EXPECT_NE(dlsym(ssl, "SSL_CTX_new"), nullptr);
  EXPECT_NE(dlsym(ssl, "SSL_CTX_set_alpn_select_cb"), nullptr);
  // No peer yet: no certificate (and no crash).
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  SSL* conn = SSL_new(ctx);
  EXPECT_EQ(get_peer(conn), nullptr);
  SSL_free(conn);
  SSL_CTX_free(ctx);
  dlclose(ssl);
  void* crypto = dlopen("libcrypto.so", RTLD_LAZY);
  ASSERT_NE(crypto, nullptr) << dlerror();
  EXPECT_NE(dlsym(crypto, "X509_get_subject_name"), nullptr);
  EXPECT_NE(dlsym(crypto, "ASN1_INTEGER_to_BN"), nullptr);
  dlclose(crypto);
}

}  // namespace
}  // namespace llm::gateway
