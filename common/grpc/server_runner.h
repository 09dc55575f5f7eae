// Starting, serving and stopping a gRPC server the same way in every binary:
// listen address (port 0 picks a free port), message size limit, the standard
// health service (grpc.health.v1) and server reflection (grpc.reflection.v1
// and v1alpha, reflection.h: so grpcurl works),
// and a clean shutdown on SIGTERM or SIGINT.
//
// Usage in main():
//   llm::BlockTerminationSignals();           // first, before any thread starts
//   auto runner = llm::ServerRunner::Start(options, {&service});
//   runner->SetServing(true);
//   runner->WaitForTerminationSignal();       // blocks
//   runner->Shutdown(absl::Seconds(5));
//
// Threads: Start() and Shutdown() from the main thread; SetServing() from any.
#ifndef LLM_COMMON_GRPC_SERVER_RUNNER_H_
#define LLM_COMMON_GRPC_SERVER_RUNNER_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace llm {

class ReflectionServices;

struct ServerOptions {
  std::string listen = "127.0.0.1:0";
  // Larger requests are answered RESOURCE_EXHAUSTED by gRPC itself.
  int max_receive_bytes = 8 << 20;
  int max_send_bytes = 64 << 20;
  // TLS / mutual TLS (MakeServerCredentials in security.h); null: plaintext.
  std::shared_ptr<grpc::ServerCredentials> credentials;
};

// Blocks SIGTERM and SIGINT in the calling thread and every thread it starts
// later, so that WaitForTerminationSignal() can take them synchronously.
void BlockTerminationSignals();

class ServerRunner {
 public:
  // Builds and starts the server. `services` must outlive the runner.
  static absl::StatusOr<std::unique_ptr<ServerRunner>> Start(
      const ServerOptions& options, const std::vector<grpc::Service*>& services);

  ~ServerRunner();
  ServerRunner(const ServerRunner&) = delete;
  ServerRunner& operator=(const ServerRunner&) = delete;

  // The bound port (useful with port 0); not meaningful for a Unix socket.
  int port() const { return port_; }
  // Where it listens, for the startup line: "port N" (TCP), or the address
  // itself for a Unix socket ("unix:/run/llm/model.sock").
  std::string endpoint() const;
  // Health status of the server ("") and of every service it hosts.
  void SetServing(bool serving);
  // Waits for SIGTERM or SIGINT; returns the signal number.
  int WaitForTerminationSignal();
  // Stops accepting calls, lets in-flight calls finish until `deadline`,
  // cancels the rest, and waits for the server to stop.
  void Shutdown(absl::Duration deadline);

  grpc::Server* server() { return server_.get(); }

 private:
  ServerRunner();
  // Before server_: the server must go first.
  std::unique_ptr<ReflectionServices> reflection_;
  std::unique_ptr<grpc::Server> server_;
  std::vector<std::string> service_names_;  // hosted services, set once by Start()
  int port_ = 0;
  std::string listen_;
  bool shut_down_ = false;
};

}  // namespace llm

#endif  // LLM_COMMON_GRPC_SERVER_RUNNER_H_
