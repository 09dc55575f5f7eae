// Test support: plain HTTP/1.1 requests to a server on 127.0.0.1 over raw
// sockets (the gateway's end-to-end tests), one connection per request.
#ifndef LLM_TESTS_HTTP_CLIENT_H_
#define LLM_TESTS_HTTP_CLIENT_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>

#include "common/strings.h"
#include "nlohmann/json.hpp"
#include "tests/server_process.h"

namespace llm::testing {

// A connected TCP socket to 127.0.0.1:port (-1 on failure).
inline int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// `headers`: extra header lines, each ending in \r\n.
inline std::string RequestText(const std::string& method, const std::string& path,
                               const std::string& body, const std::string& headers = "") {
  return StrCat(method, " ", path, " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n",
                body.empty() ? "" : "Content-Type: application/json\r\n", headers,
                "Content-Length: ", body.size(), "\r\n\r\n", body);
}

inline bool SendAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

struct HttpResponse {
  int status = 0;
  std::string headers;
  std::string body;
  nlohmann::json Json() const { return nlohmann::json::parse(body, nullptr, false); }
};

// One request, the whole response (the gateway closes each connection).
inline HttpResponse Http(int port, const std::string& method, const std::string& path,
                         const std::string& body = "", const std::string& headers = "") {
  HttpResponse r;
  const int fd = Connect(port);
  if (fd < 0) return r;
  if (!SendAll(fd, RequestText(method, path, body, headers))) {
    close(fd);
    return r;
  }
  std::string all;
  char buf[16384];
  const auto deadline = Clock::now() + std::chrono::seconds(120);
  while (Clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 1000) <= 0) continue;
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    all.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  const size_t end = all.find("\r\n\r\n");
  if (end == std::string::npos || all.size() < 12) return r;
  r.status = std::atoi(all.c_str() + 9);  // "HTTP/1.1 200 OK"
  r.headers = all.substr(0, end);
  r.body = all.substr(end + 4);
  return r;
}

}  // namespace llm::testing

#endif  // LLM_TESTS_HTTP_CLIENT_H_
