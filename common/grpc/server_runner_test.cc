#include "common/grpc/server_runner.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "common/strings.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace llm {
namespace {

using ::testing::HasSubstr;

// A TCP socket listening on a free loopback port, bound the way most servers
// bind (no SO_REUSEPORT). Closed on destruction.
class PlainListener {
 public:
  PlainListener() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof(addr);
    if (fd_ < 0 || bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        listen(fd_, 1) != 0 || getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      return;
    }
    port_ = ntohs(addr.sin_port);
  }
  ~PlainListener() {
    if (fd_ >= 0) close(fd_);
  }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// Start() on an address it cannot bind returns the error and destroys its
// half-built runner cleanly (it used to dereference a null server there).
TEST(ServerRunnerTest, PortHeldByAnotherProcessIsAnError) {
  PlainListener other;
  ASSERT_GT(other.port(), 0);
  ServerOptions options;
  options.listen = StrCat("127.0.0.1:", other.port());
  auto runner = ServerRunner::Start(options, {});
  ASSERT_FALSE(runner.ok());
  EXPECT_THAT(runner.status().message(), HasSubstr("cannot listen on " + options.listen));
}

TEST(ServerRunnerTest, InvalidHostIsAnError) {
  ServerOptions options;
  options.listen = "999.1.1.1:5";
  auto runner = ServerRunner::Start(options, {});
  ASSERT_FALSE(runner.ok());
  EXPECT_THAT(runner.status().message(), HasSubstr("cannot listen on 999.1.1.1:5"));
}

// gRPC sets SO_REUSEPORT by default: without turning it off, a second server
// on the same address starts and takes a share of the first one's
// connections.
TEST(ServerRunnerTest, TwoServersCannotShareAnAddress) {
  ServerOptions options;
  auto first = ServerRunner::Start(options, {});
  ASSERT_TRUE(first.ok()) << first.status();
  options.listen = StrCat("127.0.0.1:", (*first)->port());
  auto second = ServerRunner::Start(options, {});
  ASSERT_FALSE(second.ok()) << "a second server started on " << options.listen;
  EXPECT_THAT(second.status().message(), HasSubstr("cannot listen on " + options.listen));
  (*first)->Shutdown(absl::ZeroDuration());
}

// The address is free again once a runner has shut down.
TEST(ServerRunnerTest, AddressIsFreeAfterShutdown) {
  ServerOptions options;
  auto first = ServerRunner::Start(options, {});
  ASSERT_TRUE(first.ok()) << first.status();
  const int port = (*first)->port();
  (*first)->Shutdown(absl::ZeroDuration());
  first->reset();
  options.listen = StrCat("127.0.0.1:", port);
  auto second = ServerRunner::Start(options, {});
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ((*second)->port(), port);
}

}  // namespace
}  // namespace llm
