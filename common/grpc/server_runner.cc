#include "common/grpc/server_runner.h"

#include <signal.h>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>

#include "absl/status/status.h"
#include "common/strings.h"

namespace llm {

void BlockTerminationSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

absl::StatusOr<std::unique_ptr<ServerRunner>> ServerRunner::Start(
    const ServerOptions& options, const std::vector<grpc::Service*>& services) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  std::unique_ptr<ServerRunner> runner(new ServerRunner());
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen, grpc::InsecureServerCredentials(), &runner->port_);
  builder.SetMaxReceiveMessageSize(options.max_receive_bytes);
  builder.SetMaxSendMessageSize(options.max_send_bytes);
  for (grpc::Service* s : services) builder.RegisterService(s);
  runner->server_ = builder.BuildAndStart();
  if (runner->server_ == nullptr || runner->port_ == 0) {
    return absl::UnavailableError(
        StrCat("cannot listen on ", options.listen, " (address in use or invalid?)"));
  }
  runner->SetServing(false);
  return runner;
}

ServerRunner::~ServerRunner() {
  if (!shut_down_) Shutdown(absl::ZeroDuration());
}

void ServerRunner::SetServing(bool serving) {
  if (auto* health = server_->GetHealthCheckService()) {
    health->SetServingStatus(serving);
  }
}

int ServerRunner::WaitForTerminationSignal() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  int sig = 0;
  sigwait(&set, &sig);
  return sig;
}

void ServerRunner::Shutdown(absl::Duration deadline) {
  if (shut_down_) return;
  shut_down_ = true;
  SetServing(false);
  server_->Shutdown(absl::ToChronoTime(absl::Now() + deadline));
  server_->Wait();
}

}  // namespace llm
