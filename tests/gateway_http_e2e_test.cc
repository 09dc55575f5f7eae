// The gateway's HTTP side end to end: the real tokenizer_server and
// model_server with the default model (SmolLM2-135M-Instruct, Q4_1) and
// llm_gateway processes started with the flags under test, spoken to over
// raw sockets (and OpenSSL for HTTPS) from this process.
//
//   - HTTPS (--http_tls_cert, --http_tls_key): a request verified against the
//     test CA succeeds, a client that does not trust it fails, and a
//     plaintext request to the TLS port gets no HTTP answer; bad TLS or token
//     flags exit 2 at once with a message;
//   - the bearer token (--http_auth_token_file): 401 in OpenAI's shape
//     without / with a wrong token (never echoed), 200 with it; /health and
//     /metrics need none;
//   - keep-alive: several requests (GET, POST, HEAD) on one connection; a
//     stream closes its connection when it ends; the idle timeout and
//     --http_keep_alive_timeout 0; idle connections do not keep other
//     clients waiting (--max_concurrent 1: 10 workers, 16 idle clients).
//
// Needs models/SmolLM2-135M-Instruct.Q4_1.gguf (scripts/fetch-model.sh) and
// the openssl command.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/strings.h"
#include "common/test_paths.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/server_process.h"
#include "tests/test_certificates.h"

namespace llm {
namespace {

using nlohmann::json;
using testing::Clock;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::ServerProcess;

constexpr char kToken[] = "s3cret-gateway-key";

std::string ModelPath() {
  return llm::testing::SourceDir() + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

// The value of header `name` (case-insensitive) in `headers`, "" if absent.
std::string Header(const std::string& headers, const std::string& name) {
  std::istringstream in(headers);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const size_t colon = line.find(':');
    if (colon == std::string::npos || colon != name.size()) continue;
    if (strncasecmp(line.c_str(), name.c_str(), name.size()) != 0) continue;
    return line.substr(line.find_first_not_of(' ', colon + 1));
  }
  return "";
}

struct HttpResponse {
  int status = 0;  // 0: no response
  std::string headers;
  std::string body;
  json Json() const { return json::parse(body, nullptr, false); }
  std::string Connection() const { return Header(headers, "Connection"); }
};

// One HTTP/1.1 client connection, plain or TLS, that reads responses one at
// a time (by Content-Length, or to the end of the connection without one).
class Client {
 public:
  // nullptr when the TCP connection (or the TLS handshake) fails; then
  // *error says why.
  static std::unique_ptr<Client> Connect(int port, std::string* error) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr = {};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      *error = StrCat("connect: ", std::strerror(errno));
      if (fd >= 0) close(fd);
      return nullptr;
    }
    return std::unique_ptr<Client>(new Client(fd));
  }

  // A TLS connection that verifies the server as "localhost" against `ca`
  // ("": the system's roots, which do not hold the test CA).
  static std::unique_ptr<Client> ConnectTls(int port, const std::string& ca, std::string* error) {
    std::unique_ptr<Client> c = Connect(port, error);
    if (c == nullptr) return nullptr;
    c->ctx_ = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_verify(c->ctx_, SSL_VERIFY_PEER, nullptr);
    if (ca.empty()) {
      SSL_CTX_set_default_verify_paths(c->ctx_);
    } else if (SSL_CTX_load_verify_locations(c->ctx_, ca.c_str(), nullptr) != 1) {
      *error = "cannot load " + ca;
      return nullptr;
    }
    c->ssl_ = SSL_new(c->ctx_);
    SSL_set_fd(c->ssl_, c->fd_);
    SSL_set_tlsext_host_name(c->ssl_, "localhost");
    SSL_set1_host(c->ssl_, "localhost");
    if (SSL_connect(c->ssl_) != 1) {
      char buf[256];
      ERR_error_string_n(ERR_get_error(), buf, sizeof(buf));
      *error = StrCat("TLS handshake: ", buf);
      return nullptr;
    }
    return c;
  }

  ~Client() {
    if (ssl_ != nullptr) SSL_free(ssl_);
    if (ctx_ != nullptr) SSL_CTX_free(ctx_);
    close(fd_);
  }

  bool Send(const std::string& data) {
    size_t done = 0;
    while (done < data.size()) {
      const int n =
          ssl_ != nullptr
              ? SSL_write(ssl_, data.data() + done, static_cast<int>(data.size() - done))
              : static_cast<int>(send(fd_, data.data() + done, data.size() - done, MSG_NOSIGNAL));
      if (n <= 0) return false;
      done += static_cast<size_t>(n);
    }
    return true;
  }

  // Sends one request and reads its response.
  HttpResponse Request(const std::string& method, const std::string& path,
                       const std::string& body = "", const std::string& extra_headers = "",
                       std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
    const std::string text =
        StrCat(method, " ", path, " HTTP/1.1\r\nHost: 127.0.0.1\r\n", extra_headers,
               body.empty() ? "" : "Content-Type: application/json\r\n",
               "Content-Length: ", body.size(), "\r\n\r\n", body);
    if (!Send(text)) return {};
    return Read(timeout, method == "HEAD");
  }

  // One response; status 0 when none came within `timeout`.
  HttpResponse Read(std::chrono::milliseconds timeout, bool head = false) {
    HttpResponse r;
    const auto deadline = Clock::now() + timeout;
    size_t end;
    while ((end = buffer_.find("\r\n\r\n")) == std::string::npos) {
      if (!Fill(deadline)) return r;
    }
    r.headers = buffer_.substr(0, end);
    buffer_.erase(0, end + 4);
    if (r.headers.rfind("HTTP/1.", 0) != 0 || r.headers.size() < 12) return r;
    r.status = std::atoi(r.headers.c_str() + 9);
    const std::string length = Header(r.headers, "Content-Length");
    if (head) return r;
    if (length.empty()) {  // to the end of the connection
      while (Fill(deadline)) {
      }
      r.body = std::move(buffer_);
      buffer_.clear();
      return r;
    }
    const size_t n = std::stoul(length);
    while (buffer_.size() < n) {
      if (!Fill(deadline)) return r;
    }
    r.body = buffer_.substr(0, n);
    buffer_.erase(0, n);
    return r;
  }

  // True when the server closes the connection within `timeout` (having
  // sent nothing more).
  bool ClosedWithin(std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (Fill(deadline)) {
    }
    return closed_ && buffer_.empty();
  }

 private:
  explicit Client(int fd) : fd_(fd) {}

  // Reads more into buffer_; false at the end of the connection or the
  // deadline.
  bool Fill(Clock::time_point deadline) {
    if (closed_) return false;
    char buf[16384];
    while (true) {
      if (ssl_ == nullptr || SSL_pending(ssl_) == 0) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        if (left.count() <= 0) return false;
        pollfd p{fd_, POLLIN, 0};
        const int r = poll(&p, 1, static_cast<int>(left.count()));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
      }
      const int n = ssl_ != nullptr ? SSL_read(ssl_, buf, sizeof(buf))
                                    : static_cast<int>(recv(fd_, buf, sizeof(buf), 0));
      if (n > 0) {
        buffer_.append(buf, static_cast<size_t>(n));
        return true;
      }
      if (ssl_ != nullptr && SSL_get_error(ssl_, n) == SSL_ERROR_WANT_READ) continue;
      closed_ = true;
      return false;
    }
  }

  const int fd_;
  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
  std::string buffer_;
  bool closed_ = false;
};

// Runs build/bin/llm_gateway with `args` to its exit; its exit status (-1
// when it did not exit normally) and its output.
std::pair<int, std::string> RunGateway(const std::vector<std::string>& args) {
  const std::string log = StrCat(::testing::TempDir(), "gateway_http_e2e_", getpid(), ".log");
  std::string command = testing::BinPath("llm_gateway");
  for (const std::string& a : args) command += " '" + a + "'";
  command += " >'" + log + "' 2>&1";
  const int status = std::system(command.c_str());
  std::ifstream in(log);
  std::stringstream out;
  out << in.rdbuf();
  std::filesystem::remove(log);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out.str()};
}

class GatewayHttpTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(StrCat(::testing::TempDir(), "gateway_http_e2e_", getpid()));
    std::string error = testing::MakeTestCertificates(*dir_);
    ASSERT_EQ(error, "");
    {
      std::ofstream token(*dir_ + "/token");
      token << "  " << kToken << "\n";
    }
    std::unique_ptr<ServerProcess> tokenizer, model;
    error = testing::StartTokenizerAndModel(ModelPath(), &tokenizer, &model);
    ASSERT_EQ(error, "");
    tokenizer_ = tokenizer.release();
    model_ = model.release();
  }
  static void TearDownTestSuite() {
    delete model_;
    delete tokenizer_;
    model_ = tokenizer_ = nullptr;
    std::error_code ignored;
    if (dir_ != nullptr) std::filesystem::remove_all(*dir_, ignored);
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(tokenizer_, nullptr);
    ASSERT_NE(model_, nullptr);
  }

  static std::string P(const std::string& name) { return *dir_ + "/" + name; }

  static std::vector<std::string> ServiceFlags() {
    return {"--tokenizer", tokenizer_->address(), "--model", model_->address()};
  }

  // A gateway over the suite's services with `flags` added.
  static std::unique_ptr<ServerProcess> StartGateway(const std::vector<std::string>& flags) {
    std::vector<std::string> all = ServiceFlags();
    all.insert(all.end(), flags.begin(), flags.end());
    std::string error;
    std::unique_ptr<ServerProcess> gateway = ServerProcess::Start("llm_gateway", all, &error);
    EXPECT_NE(gateway, nullptr) << error;
    return gateway;
  }

  static std::unique_ptr<Client> Connect(int port) {
    std::string error;
    std::unique_ptr<Client> c = Client::Connect(port, &error);
    EXPECT_NE(c, nullptr) << error;
    return c;
  }

  static std::string Chat(const std::string& model, int max_tokens, bool stream) {
    return json{{"model", model},
                {"messages", json::array({{{"role", "user"}, {"content", "Say hi."}}})},
                {"temperature", 0},
                {"max_tokens", max_tokens},
                {"stream", stream}}
        .dump();
  }

  static std::string* dir_;
  static ServerProcess* tokenizer_;
  static ServerProcess* model_;
};
std::string* GatewayHttpTest::dir_ = nullptr;
ServerProcess* GatewayHttpTest::tokenizer_ = nullptr;
ServerProcess* GatewayHttpTest::model_ = nullptr;

// ---------------------------------------------------------------------------
// HTTPS.

TEST_F(GatewayHttpTest, HttpsServesAndPlaintextIsRefused) {
  std::unique_ptr<ServerProcess> gateway =
      StartGateway({"--http_tls_cert", P("server.pem"), "--http_tls_key", P("server.key")});
  ASSERT_NE(gateway, nullptr);
  std::string error;
  std::unique_ptr<Client> tls = Client::ConnectTls(gateway->port(), P("ca.pem"), &error);
  ASSERT_NE(tls, nullptr) << error;
  const HttpResponse models = tls->Request("GET", "/v1/models");
  ASSERT_EQ(models.status, 200) << models.headers;
  EXPECT_EQ(models.Json()["object"], "list") << models.body;
  // A second request on the same TLS connection.
  const HttpResponse health = tls->Request("GET", "/health");
  EXPECT_EQ(health.status, 200) << health.body;

  // Plain HTTP to the TLS port: no HTTP answer, the connection is dropped.
  std::unique_ptr<Client> plain = Connect(gateway->port());
  ASSERT_NE(plain, nullptr);
  const HttpResponse refused =
      plain->Request("GET", "/v1/models", "", "", std::chrono::seconds(10));
  EXPECT_EQ(refused.status, 0) << refused.headers;

  // A client that does not trust the test CA fails its handshake: the
  // server presents the certificate it was given.
  EXPECT_EQ(Client::ConnectTls(gateway->port(), "", &error), nullptr);
  EXPECT_THAT(error, HasSubstr("certificate verify failed"));

  // The server still serves TLS after those.
  std::unique_ptr<Client> again = Client::ConnectTls(gateway->port(), P("ca.pem"), &error);
  ASSERT_NE(again, nullptr) << error;
  EXPECT_EQ(again->Request("GET", "/v1/models").status, 200);
}

TEST_F(GatewayHttpTest, BadHttpTlsOrTokenFlagsExitTwoAtOnce) {
  struct Case {
    std::vector<std::string> flags;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--http_tls_cert", P("server.pem")}, "go together"},
      {{"--http_tls_key", P("server.key")}, "go together"},
      {{"--http_tls_cert", P("missing.pem"), "--http_tls_key", P("server.key")}, "cannot read"},
      {{"--http_tls_cert", P("garbage.pem"), "--http_tls_key", P("server.key")},
       "not a PEM certificate"},
      {{"--http_tls_cert", P("server.pem"), "--http_tls_key", P("other.key")},
       "is not the key of the certificate"},
      {{"--http_auth_token_file", P("missing_token")}, "--http_auth_token_file"},
      {{"--http_keep_alive_timeout", "-1"}, "--http_keep_alive_timeout"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = ServiceFlags();
    args.insert(args.end(), {"--listen", "127.0.0.1:0"});
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    const auto start = Clock::now();
    const auto [status, output] = RunGateway(args);
    EXPECT_EQ(status, 2) << c.flags[0] << ": " << output;
    EXPECT_THAT(output, HasSubstr(c.message)) << c.flags[0];
    EXPECT_THAT(output, Not(HasSubstr("listening on port")));
    EXPECT_LT(Clock::now() - start, std::chrono::seconds(10)) << c.flags[0];
  }
}

// ---------------------------------------------------------------------------
// Bearer token.

TEST_F(GatewayHttpTest, BearerTokenGuardsEverythingButHealthAndMetrics) {
  std::unique_ptr<ServerProcess> gateway = StartGateway({"--http_auth_token_file", P("token")});
  ASSERT_NE(gateway, nullptr);
  const int port = gateway->port();
  const auto expect_401 = [&](const HttpResponse& r, const std::string& presented) {
    EXPECT_EQ(r.status, 401) << r.headers << r.body;
    const json j = r.Json();
    ASSERT_TRUE(j.contains("error")) << r.body;
    EXPECT_EQ(j["error"]["type"], "invalid_request_error");
    EXPECT_EQ(j["error"]["code"], "invalid_api_key");
    EXPECT_TRUE(j["error"]["param"].is_null());
    EXPECT_TRUE(j["error"]["message"].is_string());
    EXPECT_THAT(r.body, Not(HasSubstr(kToken)));
    if (!presented.empty()) {
      EXPECT_THAT(r.body, Not(HasSubstr(presented)));
    }
    EXPECT_EQ(Header(r.headers, "WWW-Authenticate"), "Bearer");
    EXPECT_EQ(r.Connection(), "close");
  };
  expect_401(Connect(port)->Request("GET", "/v1/models"), "");
  expect_401(Connect(port)->Request("GET", "/v1/models", "", "Authorization: Bearer wr0ng-key\r\n"),
             "wr0ng-key");
  expect_401(Connect(port)->Request("GET", "/v1/models", "",
                                    StrCat("Authorization: Basic ", kToken, "\r\n")),
             "");
  expect_401(Connect(port)->Request("GET", "/v1/nothing"), "");
  const std::string model_id = [&] {
    const HttpResponse r = Connect(port)->Request("GET", "/v1/models", "",
                                                  StrCat("Authorization: Bearer ", kToken, "\r\n"));
    EXPECT_EQ(r.status, 200) << r.body;
    return r.Json()["data"][0]["id"].get<std::string>();
  }();
  // A chat without the key is not generated; with it, it is.
  expect_401(Connect(port)->Request("POST", "/v1/chat/completions", Chat(model_id, 4, false)), "");
  const HttpResponse chat =
      Connect(port)->Request("POST", "/v1/chat/completions", Chat(model_id, 4, false),
                             StrCat("authorization: bearer ", kToken, "\r\n"));
  EXPECT_EQ(chat.status, 200) << chat.body;
  EXPECT_EQ(chat.Json()["usage"]["completion_tokens"], 4) << chat.body;
  // Probes and scrapers need no key.
  EXPECT_EQ(Connect(port)->Request("GET", "/health").status, 200);
  const HttpResponse metrics = Connect(port)->Request("GET", "/metrics");
  ASSERT_EQ(metrics.status, 200);
  EXPECT_THAT(metrics.body,
              HasSubstr(R"(llm_gateway_requests_total{code="401",endpoint="/v1/models"} 3)"));
  EXPECT_THAT(
      metrics.body,
      HasSubstr(R"(llm_gateway_requests_total{code="200",endpoint="/v1/chat/completions"} 1)"));
  EXPECT_THAT(metrics.body, HasSubstr(R"(llm_gateway_generations_active 0)"));
}

// ---------------------------------------------------------------------------
// Keep-alive.

TEST_F(GatewayHttpTest, KeepAliveServesSeveralRequestsOnOneConnection) {
  std::unique_ptr<ServerProcess> gateway = StartGateway({"--http_keep_alive_timeout", "30"});
  ASSERT_NE(gateway, nullptr);
  std::unique_ptr<Client> c = Connect(gateway->port());
  ASSERT_NE(c, nullptr);
  const HttpResponse models = c->Request("GET", "/v1/models");
  ASSERT_EQ(models.status, 200);
  EXPECT_EQ(models.Connection(), "keep-alive");
  const std::string model_id = models.Json()["data"][0]["id"];
  const HttpResponse tokens = c->Request("POST", "/tokenize", json{{"prompt", "Paris"}}.dump());
  EXPECT_EQ(tokens.status, 200) << tokens.body;
  EXPECT_GT(tokens.Json()["count"].get<int>(), 0);
  // HEAD: headers only (a body would be read as the next response).
  const HttpResponse head = c->Request("HEAD", "/health");
  EXPECT_EQ(head.status, 200);
  EXPECT_NE(Header(head.headers, "Content-Length"), "0");
  const HttpResponse chat = c->Request("POST", "/v1/chat/completions", Chat(model_id, 3, false));
  EXPECT_EQ(chat.status, 200) << chat.body;
  EXPECT_EQ(chat.Connection(), "keep-alive");
  // An error with a body keeps the connection too.
  const HttpResponse bad = c->Request("POST", "/v1/chat/completions", "{not json");
  EXPECT_EQ(bad.status, 400);
  // A stream: no Content-Length, so it ends with its connection, at once
  // (not after the 30 s idle timeout).
  const HttpResponse stream = c->Request("POST", "/v1/chat/completions", Chat(model_id, 3, true),
                                         "", std::chrono::seconds(20));
  EXPECT_EQ(stream.status, 200);
  EXPECT_EQ(stream.Connection(), "close");
  EXPECT_THAT(stream.body, HasSubstr("data: [DONE]"));
  EXPECT_TRUE(c->ClosedWithin(std::chrono::seconds(1)));

  // A client that asks to close gets Connection: close and the end.
  std::unique_ptr<Client> once = Connect(gateway->port());
  const HttpResponse last = once->Request("GET", "/v1/models", "", "Connection: close\r\n");
  EXPECT_EQ(last.status, 200);
  EXPECT_EQ(last.Connection(), "close");
  EXPECT_TRUE(once->ClosedWithin(std::chrono::seconds(2)));
}

TEST_F(GatewayHttpTest, IdleConnectionsCloseAfterTheTimeout) {
  {
    std::unique_ptr<ServerProcess> gateway = StartGateway({"--http_keep_alive_timeout", "1"});
    ASSERT_NE(gateway, nullptr);
    std::unique_ptr<Client> c = Connect(gateway->port());
    ASSERT_EQ(c->Request("GET", "/v1/models").Connection(), "keep-alive");
    const auto idle = Clock::now();
    EXPECT_TRUE(c->ClosedWithin(std::chrono::seconds(10)));
    const auto took = Clock::now() - idle;
    EXPECT_GT(took, std::chrono::milliseconds(700));
    EXPECT_LT(took, std::chrono::seconds(6));  // civetweb polls in steps of up to 2 s
  }
  {
    std::unique_ptr<ServerProcess> gateway = StartGateway({"--http_keep_alive_timeout", "0"});
    ASSERT_NE(gateway, nullptr);
    std::unique_ptr<Client> c = Connect(gateway->port());
    const HttpResponse r = c->Request("GET", "/v1/models");
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.Connection(), "close");
    EXPECT_TRUE(c->ClosedWithin(std::chrono::seconds(1)));
  }
}

// --max_concurrent 1: civetweb has 1 + 8 + 1 = 10 workers and keeps at most
// one idle connection. 16 clients that each make a request and then sit idle
// (30 s keep-alive timeout) must not hold the workers: all but one are told
// to close, and a 17th client is answered at once.
TEST_F(GatewayHttpTest, IdleConnectionsDoNotKeepOthersWaiting) {
  std::unique_ptr<ServerProcess> gateway =
      StartGateway({"--max_concurrent", "1", "--http_keep_alive_timeout", "30"});
  ASSERT_NE(gateway, nullptr);
  std::vector<std::unique_ptr<Client>> idle;
  int kept = 0;
  for (int i = 0; i < 16; ++i) {
    idle.push_back(Connect(gateway->port()));
    ASSERT_NE(idle.back(), nullptr);
    const HttpResponse r =
        idle.back()->Request("GET", "/v1/models", "", "", std::chrono::seconds(10));
    ASSERT_EQ(r.status, 200) << "client " << i << " was not answered";
    if (r.Connection() == "keep-alive") ++kept;
  }
  EXPECT_EQ(kept, 1);
  const auto start = Clock::now();
  std::unique_ptr<Client> late = Connect(gateway->port());
  ASSERT_NE(late, nullptr);
  const HttpResponse r = late->Request("GET", "/v1/models", "", "", std::chrono::seconds(10));
  EXPECT_EQ(r.status, 200);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5)) << "(the idle timeout is 30 s)";
  // The one kept connection still works.
  EXPECT_EQ(idle.front()->Request("GET", "/health").status, 200);
}

}  // namespace
}  // namespace llm
