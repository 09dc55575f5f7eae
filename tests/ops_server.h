// Test support for the operations tests: a server process whose stdout port
// lines (gRPC and metrics) are read, a plain HTTP GET for /metrics, a
// sample's value in a Prometheus scrape, and a random model file.
//
// Shared by ops_test.cc, limits_drain_test.cc and routing_test.cc.
#ifndef LLM_TESTS_OPS_SERVER_H_
#define LLM_TESTS_OPS_SERVER_H_

#include <arpa/inet.h>
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/strings.h"
#include "model_svc/testing/random_model.h"
#include "tests/server_process.h"

namespace llm::testing {

// A server process whose stdout lines (port lines) are read here. Started
// with --drain_seconds 1 unless `flags` say otherwise (a later flag wins).
class OpsServer {
 public:
  // Starts build/bin/<binary> with `flags` on 127.0.0.1:0 and reads its
  // stdout until the gRPC port line and, with `want_metrics`, the metrics
  // port line. Null with *error set on failure.
  // `stderr_path`: where the server's stderr goes ("" = the test's).
  static std::unique_ptr<OpsServer> Start(const std::string& binary,
                                          const std::vector<std::string>& flags, bool want_metrics,
                                          std::string* error, const std::string& stderr_path = "") {
    // A short drain: the tests' idle channels would hold the default 5 s.
    std::vector<std::string> argv = {BinPath(binary), "--listen", "127.0.0.1:0", "--drain_seconds",
                                     "1"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    int out_pipe[2];
    if (pipe2(out_pipe, O_CLOEXEC) != 0) {
      *error = "pipe2 failed";
      return nullptr;
    }
    // The child inherits fd 2: point it at the file around the fork.
    int saved_stderr = -1;
    if (!stderr_path.empty()) {
      const int file = open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      saved_stderr = dup(STDERR_FILENO);
      dup2(file, STDERR_FILENO);
      close(file);
    }
    const pid_t pid = Spawn(argv, -1, out_pipe[1], error);
    if (saved_stderr >= 0) {
      dup2(saved_stderr, STDERR_FILENO);
      close(saved_stderr);
    }
    close(out_pipe[1]);
    if (pid < 0) {
      close(out_pipe[0]);
      return nullptr;
    }
    std::unique_ptr<OpsServer> s(new OpsServer(pid, out_pipe[0]));
    const std::string prefix = binary + ": ";
    while (s->port_ == 0 || (want_metrics && s->metrics_port_ == 0)) {
      const std::string line = s->ReadLine(std::chrono::seconds(60));
      if (line.empty()) {
        *error = StrCat("no port lines from ", binary);
        return nullptr;
      }
      int* target = nullptr;
      std::string rest;
      if (line.rfind(prefix + "listening on port ", 0) == 0) {
        target = &s->port_;
        rest = line.substr(prefix.size() + 18);
      } else if (line.rfind(prefix + "metrics on port ", 0) == 0) {
        target = &s->metrics_port_;
        rest = line.substr(prefix.size() + 16);
      }
      if (target != nullptr) *target = std::atoi(rest.c_str());
    }
    return s;
  }

  ~OpsServer() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      WaitForExit(pid_, std::chrono::seconds(10));
    }
    close(fd_);
  }

  int port() const { return port_; }
  int metrics_port() const { return metrics_port_; }
  std::string address() const { return StrCat("127.0.0.1:", port_); }

  // Sends SIGTERM; the wait status, or nullopt if it had to be killed.
  std::optional<int> Terminate() {
    kill(pid_, SIGTERM);
    return WaitExit(std::chrono::seconds(15));
  }

  // Sends `sig` and returns at once (see WaitExit).
  void Signal(int sig) { kill(pid_, sig); }
  // Waits for the exit; SIGKILL after `timeout`. The wait status, or nullopt
  // if it had to be killed.
  std::optional<int> WaitExit(std::chrono::milliseconds timeout) {
    const std::optional<int> status = WaitForExit(pid_, timeout);
    pid_ = -1;
    return status;
  }

 private:
  OpsServer(pid_t pid, int fd) : pid_(pid), fd_(fd) {}

  std::string ReadLine(std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    std::string line;
    while (Clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      char c;
      if (read(fd_, &c, 1) != 1) return line;
      if (c == '\n') return line;
      line.push_back(c);
    }
    return "";
  }

  pid_t pid_;
  int fd_;
  int port_ = 0;
  int metrics_port_ = 0;
};

// GET http://127.0.0.1:port/path; the response (headers and body), "" on failure.
inline std::string HttpGet(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string out;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string request = StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
    if (write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
      char buf[4096];
      ssize_t n;
      while ((n = read(fd, buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
    }
  }
  close(fd);
  return out;
}

// The value of the sample `series` (name plus labels, as written, e.g.
// `x_total{code="NOT_FOUND"}`) in a text-format scrape; nullopt if absent.
inline std::optional<double> Sample(const std::string& scrape, const std::string& series) {
  size_t pos = 0;
  const std::string needle = series + " ";
  while ((pos = scrape.find(needle, pos)) != std::string::npos) {
    if (pos == 0 || scrape[pos - 1] == '\n') {
      return std::strtod(scrape.c_str() + pos + needle.size(), nullptr);
    }
    pos += needle.size();
  }
  return std::nullopt;
}

inline std::string Describe(const grpc::Status& s) {
  return StrCat(static_cast<int>(s.error_code()), ": ", s.error_message());
}

// A random Llama model (RandomModelSpec defaults, `seed`) written to a
// temporary file named after `name`; "" on failure.
inline std::string WriteRandomModel(const std::string& name, uint64_t seed) {
  model::testing::RandomModelSpec spec;
  spec.name = StrCat("random-llama-", name);
  spec.seed = seed;
  const std::string path = StrCat(::testing::TempDir(), name, "_", getpid(), ".gguf");
  absl::StatusOr<std::string> bytes = model::testing::RandomModelGguf(spec);
  if (!bytes.ok()) return "";
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes->data(), static_cast<std::streamsize>(bytes->size()));
  return out ? path : "";
}

}  // namespace llm::testing

#endif  // LLM_TESTS_OPS_SERVER_H_
