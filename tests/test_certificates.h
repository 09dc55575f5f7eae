// Test support: a CA and a server certificate made with the openssl command
// (scripts/setup.sh installs it) in a fresh directory, for the tests of TLS.
//
//   ca.pem, ca.key          a self-signed CA
//   server.pem, server.key  signed by it, for IP 127.0.0.1 and DNS localhost
//   client.pem, client.key  signed by it, a client certificate (mutual TLS)
//   rogue.pem, rogue.key    self-signed: a client the CA does not vouch for
//   other.key               a key of no certificate (a mismatch)
//   encrypted.key           server.key under the passphrase "pass"
//   garbage.pem             not PEM at all
#ifndef LLM_TESTS_TEST_CERTIFICATES_H_
#define LLM_TESTS_TEST_CERTIFICATES_H_

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/strings.h"

namespace llm::testing {

// Makes the files above in `dir` (created). Returns "" or what went wrong.
inline std::string MakeTestCertificates(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return StrCat("cannot create ", dir, ": ", ec.message());
  const std::string script =
      StrCat("set -e; cd '", dir,
             "'; K='-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes'; "
             "openssl req -x509 $K -keyout ca.key -out ca.pem -days 2 -subj /CN=llm-test-ca; "
             "openssl req $K -keyout server.key -out server.csr -subj /CN=localhost; "
             "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > server.ext; "
             "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
             "-out server.pem -days 2 -extfile server.ext; "
             "openssl req $K -keyout client.key -out client.csr -subj /CN=llm-test-client; "
             "openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
             "-out client.pem -days 2; "
             "openssl req -x509 $K -keyout rogue.key -out rogue.pem -days 2 -subj /CN=rogue; "
             "openssl genpkey -algorithm ec -pkeyopt ec_paramgen_curve:prime256v1 -out other.key; "
             "openssl pkey -in server.key -aes256 -passout pass:pass -out encrypted.key; "
             "printf 'not a certificate\\n' > garbage.pem");
  {
    std::ofstream out(dir + "/make.sh");
    out << script << "\n";
  }
  const std::string command = StrCat("bash '", dir, "/make.sh' >'", dir, "/make.log' 2>&1");
  if (std::system(command.c_str()) != 0) return StrCat("openssl failed: see ", dir, "/make.log");
  return "";
}

}  // namespace llm::testing

#endif  // LLM_TESTS_TEST_CERTIFICATES_H_
